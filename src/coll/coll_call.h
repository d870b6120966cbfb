// One collective call as this rank sees it: which of its buffer arguments are significant
// here, what each reads or writes (its elements as pieces at byte displacements from the
// argument), and where each lives. Built by the binding's describe_* functions before the
// call goes to MPICH, so that device buffers can be staged through host memory and MPICH
// handed host pointers in their place (staged.h).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "accel/accel.h"

namespace mpiacc {

// `count` elements of `type` starting `disp` bytes from the buffer argument.
struct CollPiece {
    std::int64_t disp;
    std::int64_t count;
    MPI_Datatype type;
};

// One buffer argument (the collective's first or second), significant at this rank or not.
struct CollBuffer {
    const char *arg = "";
    void *user = nullptr;  // as passed: a host or device pointer, a cl_mem handle, MPI_IN_PLACE
    bool significant = false;
    bool in = false;   // the collective reads it
    bool out = false;  // the collective writes it
    BufferAttrs attrs;
    std::int64_t lo = 0, hi = 0;               // bytes the pieces touch, relative to `user`
    bool covered = true;                       // an output writes every byte of [lo, hi)
    std::vector<MPI_Datatype> types;           // every type it was described with
    const MPI_Datatype *type_array = nullptr;  // the "w" collectives' per-peer types
    int ntypes = 0;
    bool device() const { return significant && attrs.kind != BufKind::HOST && hi > lo; }
};

class CollCall {
public:
    CollCall(const char *call, MPI_Comm comm) : call_(call), comm_(comm) {}
    CollCall(CollCall &&) = default;
    CollCall &operator=(CollCall &&) = default;

    const char *call() const { return call_; }
    MPI_Comm comm() const { return comm_; }

    // Argument `slot` (0 or 1) as passed, whether significant here or not: the issue
    // function hands MPICH whatever host(slot) says.
    void name(int slot, const char *arg, const void *user);
    // Describes a significant argument: classifies it (the MPI-ACC attributes of the
    // pieces' types, or the pointer) and finds its footprint. MPI_SUCCESS, or an MPI error
    // class with *why naming the argument. MPI_IN_PLACE is never described.
    int describe(int slot, bool in, bool out, const std::vector<CollPiece> &pieces, std::string *why);
    // The per-peer type array of a "w" collective's argument, kept for a deferred call.
    void set_type_array(int slot, const MPI_Datatype *types, int n);

    CollBuffer &buffer(int slot) { return buf_[slot]; }
    const CollBuffer &buffer(int slot) const { return buf_[slot]; }
    // A significant buffer is device memory: the call is staged.
    bool staged() const { return buf_[0].device() || buf_[1].device(); }

    // What MPICH is handed: the host scratch standing in for a staged buffer (placed so
    // that the buffer's displacements land in it), else the argument as passed.
    void *host(int slot) const { return host_[slot] ? host_[slot] : buf_[slot].user; }
    void set_host(int slot, void *p) { host_[slot] = p; }
    // What MPICH is handed for a type the call names: the predefined type a tagged
    // duplicate stands for (MPICH reduces predefined types only), or the duplicate that
    // keeps a derived type alive while the call waits its turn (the user may free a type
    // once a nonblocking call has returned), else the type itself.
    MPI_Datatype type(MPI_Datatype t) const;
    const MPI_Datatype *types(int slot) const;
    // A count or displacement array of `bytes` bytes the call names (describe_*).
    void note_array(const void *array, std::size_t bytes);
    // A copy of a noted array, for a call that waits its turn: MPICH copies them at a
    // nonblocking call, and programs written against it let them go at once. Arrays not
    // noted (not significant here) come back as they are.
    template <class T>
    const T *kept(const T *array) {
        return static_cast<const T *>(keep_array(array));
    }
    // Duplicates every derived type the call names (before it is deferred).
    void keep_types();
    void release_types();
    ~CollCall() { release_types(); }  // a moved-from call keeps none

private:
    void note_predefined(MPI_Datatype t);
    const void *keep_array(const void *array);

    const char *call_;
    MPI_Comm comm_;
    CollBuffer buf_[2];
    void *host_[2] = {nullptr, nullptr};
    std::vector<std::pair<MPI_Datatype, MPI_Datatype>> kept_;  // user type -> predefined base or duplicate
    std::vector<MPI_Datatype> kept_arrays_[2];
    struct Array {
        const void *user;
        std::size_t bytes;
        std::vector<char> copy;  // its heap block stays put when the call moves
    };
    std::vector<Array> arrays_;
};

// MPICH's form of the call, on the call's host pointers and types: a nonblocking
// collective (PMPI_I...), or a persistent one's initialisation (PMPI_..._init).
using CollIssue = std::function<int(const CollCall &c, MPI_Request *req)>;

}  // namespace mpiacc
