# Sourced by the tests that start mpirun: CI runs as root, in a container without network
# interfaces, and ASan builds see OpenMPI's own start-up allocations, which are never freed
# (suppressed by tests/lsan.supp; full stacks to match them).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export LSAN_OPTIONS="suppressions=$BATS_TEST_DIRNAME/../lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
