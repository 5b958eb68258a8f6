// Re-executes the program once with a bounded OpenMP spin (see omp_policy.h).
#include "omp_policy.h"

#include <unistd.h>

#include <cstdlib>

namespace app {

void ensure_omp_wait_policy(char** argv, const char* spincount) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT") || std::getenv("PL_OMP_POLICY_SET"))
    return;
  setenv("GOMP_SPINCOUNT", spincount, 1);
  setenv("PL_OMP_POLICY_SET", "1", 1);
  execv("/proc/self/exe", argv);
  // execv failed (no /proc?): carry on with libgomp's defaults.
}

}  // namespace app
