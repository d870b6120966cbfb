// MPI_Pack and its relatives with a typed buffer on a device (pack_device.cc).
#pragma once

#include <mpi.h>

#include <string>

#include "protocol/transfer.h"

namespace mpiacc {

// Classifies the typed buffer of a pack call (argument `arg`) and, when it is on a
// device, captures it into *mb for copies within the call; *device says which.
int classify_typed(const void *buf, MPI_Count count, MPI_Datatype type, const char *arg, MessageBuffer *mb,
                   bool *device, std::string *why);

// Packs mb's elements into host memory outbuf at *position (MPI_ERR_TRUNCATE when they
// do not fit in outsize), and advances it; the reverse from inbuf.
int pack_device(MessageBuffer &mb, void *outbuf, MPI_Count outsize, MPI_Count *position, const char *call,
                std::string *why);
int unpack_device(const void *inbuf, MPI_Count insize, MPI_Count *position, MessageBuffer &mb, std::string *why);

// Contiguous packed bytes captured in pb (device memory, or host memory it turned out
// to be): the first n bytes from or to host memory, waited for.
int copy_into_device(MessageBuffer &pb, const void *src, std::size_t n, std::string *why);
int copy_out_of_device(MessageBuffer &pb, void *dst, std::size_t n, const char *call, std::string *why);

// mb's elements packed straight into the device bytes captured in pb (pack), or unpacked
// from them, in one pass on the device, waited for. MPI_ERR_UNSUPPORTED_OPERATION when
// the kinds cannot (another kind or device): the caller goes through host memory.
int move_packed_on_device(MessageBuffer &mb, MessageBuffer &pb, bool pack, std::string *why);

// The same in the representation `datarep` (external32).
int pack_external_device(const char *datarep, MessageBuffer &mb, MPI_Count count, MPI_Datatype type, void *outbuf,
                         MPI_Count outsize, MPI_Count *position, const char *call, std::string *why);
int unpack_external_device(const char *datarep, const void *inbuf, MPI_Count insize, MPI_Count *position,
                           MessageBuffer &mb, MPI_Count count, MPI_Datatype type, std::string *why);

}  // namespace mpiacc
