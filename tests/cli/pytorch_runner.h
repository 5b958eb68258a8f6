// Finding a Python that imports torch, and running an exported train.py with it (the PyTorch cross-check's helpers).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace cli_test {

// Debian's OpenBLAS misreads this machine with these set (docs/pytorch.md).
inline std::string torch_env() { return "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "; }

// $PL_TORCH_PYTHON when set (and only it), else the first of
// /usr/bin/python3 (Debian's python3-torch) and the python3 on PATH that
// imports torch and numpy; "" when none does.
inline std::string torch_python() {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("PL_TORCH_PYTHON")) {
    candidates.emplace_back(p);
  } else {
    candidates.emplace_back("/usr/bin/python3");
    candidates.emplace_back("python3");
  }
  for (const std::string& py : candidates) {
    const std::string cmd = torch_env() + "'" + py + "' -c 'import torch, numpy' >/dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return py;
  }
  return "";
}

struct PyResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

inline PyResult run_python(const std::string& python, const std::string& args) {
  PyResult r;
  run_shell(torch_env() + "'" + python + "' " + args + " 2>&1", r.out, r.exit_code);
  return r;
}

}  // namespace cli_test
