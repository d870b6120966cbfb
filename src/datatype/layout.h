// What the protocol needs to know about (count, datatype) on the host side: packed
// size, whether the bytes are one contiguous run, and where that run starts.
// Non-contiguous host layouts are copied through the flattened type (flat_type.h); on a
// device buffer the device kernels pack them (protocol/typed_device.h).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>

namespace mpiacc {

struct Layout {
    std::size_t bytes = 0;   // packed size of count elements
    bool contiguous = true;  // bytes lie in one run starting at buf + true_lb
    MPI_Aint true_lb = 0;
    int error = MPI_SUCCESS;  // MPI error class when the type is invalid / count too large
};

// MPICH encodes a builtin datatype's size in its handle; reading it there keeps the
// host fast path free of a PMPI_Type_size call.
inline bool is_builtin_type(MPI_Datatype t) { return (static_cast<std::uint32_t>(t) & 0xc0000000u) == 0x40000000u; }
inline std::size_t builtin_type_size(MPI_Datatype t) { return (static_cast<std::uint32_t>(t) & 0x0000ff00u) >> 8; }

// Packed bytes of (count, type); -1 on an invalid type. Inline for builtin types: it
// runs on every host send and receive.
long long derived_packed_bytes(int count, MPI_Datatype type);
inline long long packed_bytes(int count, MPI_Datatype type) {
    if (is_builtin_type(type)) return static_cast<long long>(count) * static_cast<long long>(builtin_type_size(type));
    return derived_packed_bytes(count, type);
}

Layout describe_layout(int count, MPI_Datatype type);

// buf + displacement for a buf that may be MPI_BOTTOM (NULL), whose type's displacements
// are then absolute addresses.
inline char *typed_address(const void *buf, MPI_Aint displacement) {
    return reinterpret_cast<char *>(reinterpret_cast<std::uintptr_t>(buf) + static_cast<std::uintptr_t>(displacement));
}

// PMPI_Type_free, and the facts cached about the type go with it: MPICH hands a freed
// handle out again, and facts kept under it would describe a type of another size. Every
// free of a type MPI-ACC may have described goes through here (MPI_Type_free, TypeRef).
int free_datatype(MPI_Datatype *type);

// Host copies between a typed buffer and packed bytes, for byte ranges [offset, offset+len)
// of the packed stream (used for prefixes on truncation and bounce buffers).
int pack_range(const void *buf, int count, MPI_Datatype type, std::size_t offset, void *out, std::size_t len);
int unpack_range(const void *packed, std::size_t len, void *buf, int count, MPI_Datatype type, std::size_t offset);

}  // namespace mpiacc
