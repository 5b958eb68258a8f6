// OpenMP wait policy for the engine's thread pool, chosen before libgomp starts.
#pragma once

namespace app {

// libgomp reads OMP_WAIT_POLICY / GOMP_SPINCOUNT once, when it is loaded —
// before main() runs. Its default (spin ~300k iterations, then sleep) is the
// fastest on an idle machine, but when another busy thread holds a core (the
// GUI thread, another process) every parallel region waits for a descheduled
// spinner: oneDNN's 2-thread GEMMs measured 30-50x slower here. A bounded
// spin keeps the idle-machine speed within a few percent and removes the
// collapse.
//
// If neither variable is set by the user, sets GOMP_SPINCOUNT=`spincount`
// and re-executes the program (once; PL_OMP_POLICY_SET guards the loop).
// Returns normally when nothing needed doing or the re-exec failed. Call it
// first thing in main(), before any thread exists.
void ensure_omp_wait_policy(char** argv, const char* spincount);

}  // namespace app
