// Attribute bookkeeping on datatypes, and the support queries.
#include "accel/accel.h"
#include "binding/binding.h"
#include "mpiacc.h"

using namespace mpiacc;

extern "C" {

int MPI_Type_set_attr(MPI_Datatype type, int keyval, void *value) {
    int rc = PMPI_Type_set_attr(type, keyval, value);
    Context &ctx = context();
    // Setting an attribute that was already there runs the delete callback on the old
    // value first, so counting every successful set keeps the tally exact.
    if (rc == MPI_SUCCESS && ctx.initialized && ctx.keyvals.ours(keyval)) note_attr_set(type);
    return rc;
}

int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype *newtype) {
    int rc = PMPI_Type_dup(oldtype, newtype);
    Context &ctx = context();
    if (rc == MPI_SUCCESS && ctx.initialized && ctx.tagged_type_count.load() != 0) {
        bool tagged;
        {
            StateLock lock;
            tagged = ctx.tagged_types.count(oldtype) != 0;
        }
        if (tagged) note_type_duplicated(*newtype);
    }
    return rc;
}

int MPI_Type_free(MPI_Datatype *type) { return free_datatype(type); }

int MPIX_Query_cuda_support(void) {
    Accel *cuda = accel_for_buf_type(MPIX_ACC_BUF_CUDA);
    return cuda && cuda->available() ? 1 : 0;
}

int MPIX_Query_opencl_support(void) {
    Accel *cl = accel_for_buf_type(MPIX_ACC_BUF_OPENCL);
    return cl && cl->available() ? 1 : 0;
}

}  // extern "C"
