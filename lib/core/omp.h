/*
 * omp — the OpenMP default every program starts with: threads that wait passively.
 *
 * libgomp's default lets an idle worker spin (GOMP_SPINCOUNT 300000, ~0.1-1 ms) before it
 * sleeps. On a machine shared with other work (a second run, other jobs, a laptop) the
 * spinning threads take the cores the busy ones need, and steps got 1.6-2.1x slower than with
 * OMP_WAIT_POLICY=passive (docs/train.md, "Threads"). Our parallel regions are long enough that
 * waking a sleeping thread costs little, so passive is the default, unless the user chose
 * otherwise by setting OMP_WAIT_POLICY or GOMP_SPINCOUNT.
 *
 * libgomp reads its environment in a library constructor, before main() runs, so setenv() in
 * main is too late (and so is one in the executable's .preinit_array: glibc sets environ up
 * again after it). The program therefore starts itself again once, with the variable added:
 * execve of /proc/self/exe with the same argv and environment plus OMP_WAIT_POLICY=passive and
 * SWIFT_OMP_DEFAULT=1 (the mark that stops a second re-exec and tells the trace the policy is
 * ours). It happens in the .preinit_array of every program linking lib/core (before the
 * libraries' constructors run, so start-up is paid once), and keeps the pid, so mpirun, srun
 * and Slurm see the same process. swift_omp_defaults() does the same from main() where that
 * hook did not run; call it first thing:
 *
 *     int main(int argc, char **argv)
 *     {
 *         swift_omp_defaults(argv);   // nothing when the hook ran; else may start again, once
 *         swift_set_progname(argv[0]);
 *         ...
 */
#ifndef SWIFT_OMP_H
#define SWIFT_OMP_H

/* Re-exec with OMP_WAIT_POLICY=passive and SWIFT_OMP_DEFAULT=1 added, unless OMP_WAIT_POLICY,
 * GOMP_SPINCOUNT or SWIFT_OMP_DEFAULT is set already. Returns (without a message) when nothing
 * is to be done or the re-exec is not possible (no /proc): libgomp's default then. */
void swift_omp_defaults(char **argv);

/* The wait policy this process runs with, for the trace and for people: "passive (default)",
 * "passive", "active" (the user's OMP_WAIT_POLICY), "GOMP_SPINCOUNT=N", or "spin, then sleep"
 * (libgomp's default: the re-exec was not possible). Borrowed, static. */
const char *swift_omp_wait_policy(void);

#endif
