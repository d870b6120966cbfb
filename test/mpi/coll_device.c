/* Every MPI collective on buffers of one kind, compared byte for byte with the same
 * collective on host buffers: blocking, nonblocking and persistent (started twice, with
 * new data before the second start), in place where MPI allows it, with guard bytes
 * around every buffer; every predefined reduction on int, float, double and MPI_2INT and
 * a user-defined op; kinds mixed across ranks; a derived datatype; intercommunicators;
 * large-count calls; 1 MiB; a cl_mem region past the end of its buffer.
 *
 * The kind: argv[1], else $COLL_DEVICE_KIND, else the program's name ("host", "opencl"
 * or "cuda" in it). test/run-test takes the rank count from a name ending in "_npN"
 * (coll_device_opencl_np3: OpenCL buffers, 3 ranks). test/gpu/cuda_coll.c builds this
 * file with CUDA memory. Without a device of the kind, every case skips by name.
 * MPIACC-TEST-RANKS: 2 */
#include "coll_cases.h"

static int coll_kind_from(int argc, char **argv) {
    const char *k = argc > 1 ? argv[1] : getenv("COLL_DEVICE_KIND");
    if (!k || !*k) {
        const char *base = strrchr(argv[0], '/');
        base = base ? base + 1 : argv[0];
        k = strstr(base, "opencl") ? "opencl" : strstr(base, "cuda") ? "cuda" : "host";
    }
    for (int i = 0; i < 3; ++i)
        if (!strcmp(k, coll_kind_names[i])) return i;
    return -1;
}

/* The predefined ops on the types MPI defines them for, and one op of the user's. */
static const coll_op_arg coll_ops[] = {
    {"sum_int", MPI_SUM, MPI_INT, 0},         {"prod_int", MPI_PROD, MPI_INT, 0},
    {"max_int", MPI_MAX, MPI_INT, 0},         {"min_int", MPI_MIN, MPI_INT, 0},
    {"land_int", MPI_LAND, MPI_INT, 0},       {"bor_int", MPI_BOR, MPI_INT, 0},
    {"bxor_int", MPI_BXOR, MPI_INT, 0},       {"sum_float", MPI_SUM, MPI_FLOAT, 0},
    {"prod_float", MPI_PROD, MPI_FLOAT, 0},   {"max_float", MPI_MAX, MPI_FLOAT, 0},
    {"min_float", MPI_MIN, MPI_FLOAT, 0},     {"sum_double", MPI_SUM, MPI_DOUBLE, 0},
    {"prod_double", MPI_PROD, MPI_DOUBLE, 0}, {"max_double", MPI_MAX, MPI_DOUBLE, 0},
    {"min_double", MPI_MIN, MPI_DOUBLE, 0},   {"minloc_2int", MPI_MINLOC, MPI_2INT, 0},
    {"maxloc_2int", MPI_MAXLOC, MPI_2INT, 0}, {"user_defined_commutative_op_int", MPI_OP_NULL, MPI_INT, 0},
};
#define COLL_NOPS (sizeof coll_ops / sizeof coll_ops[0])

int main(int argc, char **argv) {
#ifdef COLL_BEFORE_INIT
    COLL_BEFORE_INIT(); /* test/gpu/cuda_coll_algorithms.c: a knob set before MPI_Init */
#endif
    MT_INIT(&argc, &argv);
    MPI_Comm_set_errhandler(W, MPI_ERRORS_RETURN);
    const int kind = coll_kind_from(argc, argv);
    if (kind < 0) {
        if (mt_rank == 0) fprintf(stderr, "usage: %s [host|opencl|cuda]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
#ifdef COLL_SETUP
    COLL_SETUP(kind); /* test/gpu/cuda_coll.c: CUDA memory, or why every case skips */
#endif
    if (kind == CK_CUDA && !coll_cuda && !coll_skip_all) coll_skip_all = "CUDA buffers: run test/gpu/cuda_coll";
    if (kind == CK_OPENCL) {
        coll_ocl = ocl_setup();
        if (!ocl_all_ok(&coll_ocl)) coll_skip_all = "no usable OpenCL platform";
    }
    int dims[1] = {mt_size}, periods[1] = {1};
    MPI_Cart_create(W, 1, dims, periods, 0, &coll_ring);
    MPI_Comm_set_errhandler(coll_ring, MPI_ERRORS_RETURN);
    MPI_Comm half;
    MPI_Comm_split(W, mt_rank % 2, mt_rank, &half);
    MPI_Intercomm_create(half, 0, W, mt_rank % 2 == 0 ? 1 : 0, 77, &coll_inter);
    MPI_Comm_set_errhandler(coll_inter, MPI_ERRORS_RETURN);
    MPI_Op_create(coll_plus_one, 1, &coll_user_op);
    if (!coll_skip_all && kind != CK_HOST) coll_probe(kind);
    /* COLL_ONLY=text runs only the cases whose name contains it; COLL_PMPI=1 calls MPICH's
     * own entry points on host buffers (what MPICH alone does). For a person, not CI. */
    coll_use_pmpi = kind == CK_HOST && getenv("COLL_PMPI") && !strcmp(getenv("COLL_PMPI"), "1");
    const char *kn = coll_kind_names[kind];
    if (mt_rank == 0) printf("# %s buffers, %d ranks\n", kn, mt_size);

    static char names[S_COUNT * 3 + COLL_NOPS + 16][128];
    int nn = 0;
    static coll_matrix_arg margs[S_COUNT * 3];
    for (int s = 0; s < S_COUNT; ++s)
        for (int mode = 0; mode < 3; ++mode) {
            coll_matrix_arg *m = &margs[s * 3 + mode];
            m->spec = s, m->mode = mode, m->kind = kind;
            const char *how = s == S_BARRIER                       ? "_between_broadcasts"
                              : (coll_specs[s].flags & CF_INPLACE) ? "_also_in_place"
                                                                   : "";
            snprintf(names[nn], sizeof names[nn], "%s_%s_on_%s_buffers_matches_host%s", coll_specs[s].name,
                     coll_mode_names[mode], kn, how);
            coll_case(names[nn++], coll_mpich_persistent_defect(s, kind, mode), coll_matrix_case, m);
        }

    static coll_op_arg oargs[COLL_NOPS];
    for (size_t i = 0; i < COLL_NOPS; ++i) {
        oargs[i] = coll_ops[i];
        oargs[i].kind = kind;
        snprintf(names[nn], sizeof names[nn], "reductions_%s_on_%s_buffers_match_host", coll_ops[i].name, kn);
        coll_case(names[nn++], NULL, coll_op_case, &oargs[i]);
    }

    const char *no_device = kind == CK_HOST ? "needs a device kind (run with opencl or cuda)" : NULL;
    static coll_mixed_arg mixed[2];
    mixed[0].dev_kind = mixed[1].dev_kind = kind;
    mixed[1].even_device = 1;
    snprintf(names[nn], sizeof names[nn], "host_root_with_%s_non_roots_matches_host", kn);
    coll_case(names[nn++], no_device, coll_mixed_case, &mixed[0]);
    snprintf(names[nn], sizeof names[nn], "%s_on_even_ranks_host_on_odd_ranks_matches_host", kn);
    coll_case(names[nn++], no_device, coll_mixed_case, &mixed[1]);

    snprintf(names[nn], sizeof names[nn], "vector_type_allgather_and_bcast_on_%s_buffers_keep_holes", kn);
    coll_case(names[nn++], NULL, coll_derived_case, &kind);
    static int ic[2][2];
    for (int s = 0; s < 2; ++s) {
        ic[s][0] = kind, ic[s][1] = s;
        snprintf(names[nn], sizeof names[nn], "intercommunicator_%s_on_%s_buffers_matches_host",
                 s ? "allreduce" : "bcast", kn);
        coll_case(names[nn++], NULL, coll_inter_case, ic[s]);
    }
    snprintf(names[nn], sizeof names[nn], "large_count_bcast_allreduce_allgather_on_%s_buffers_match_host", kn);
    coll_case(names[nn++], NULL, coll_large_count_case, &kind);
    snprintf(names[nn], sizeof names[nn], "one_mib_allreduce_and_ibcast_on_%s_buffers_match_host", kn);
    coll_case(names[nn++], NULL, coll_mib_case, &kind);
    coll_case("cl_mem_region_past_its_end_is_an_error_naming_the_call_and_the_next_collective_works",
              kind == CK_OPENCL ? NULL : "needs cl_mem buffers", coll_bad_region_case, NULL);
    coll_case("staged_opencl_collectives_go_through_pinned_scratch_of_the_buffers_context_reused_per_call",
              kind == CK_OPENCL ? NULL : "needs cl_mem buffers", coll_opencl_scratch_case, NULL);
#ifdef COLL_EXTRA_CASES
    COLL_EXTRA_CASES(kind);
#endif

    MPI_Op_free(&coll_user_op);
    MPI_Comm_free(&coll_inter);
    MPI_Comm_free(&half);
    MPI_Comm_free(&coll_ring);
    if (kind == CK_OPENCL) ocl_teardown(&coll_ocl);
    return mt_finalize();
}
