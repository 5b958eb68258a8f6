// Runs precision-lab-cli as a user would: the tests of each command share it.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#ifndef PL_CLI_PATH
#error "PL_CLI_PATH must name the built precision-lab-cli"
#endif

namespace cli_test {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `cmd` through the shell: its stdout into `out`, its exit code (-1
// when it did not exit) into `exit_code`. False when it could not start.
inline bool run_shell(const std::string& cmd, std::string& out, int& exit_code) {
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return false;
  char buf[4096];
  std::size_t got = 0;
  while ((got = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, got);
  const int status = pclose(pipe);
  exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return true;
}

// Runs the CLI with the given (shell-safe) arguments, capturing stdout and
// stderr separately.
inline RunResult run_cli(const std::string& args) {
  char tmpl[] = "/tmp/pl_cli_test_XXXXXX";
  const int fd = mkstemp(tmpl);
  EXPECT_GE(fd, 0);
  close(fd);
  const std::string err_path = tmpl;
  const std::string cmd = std::string("'") + PL_CLI_PATH + "' " + args + " 2>'" + err_path + "'";
  RunResult r;
  EXPECT_TRUE(run_shell(cmd, r.out, r.exit_code)) << cmd;
  r.err = read_file(err_path);
  std::remove(err_path.c_str());
  return r;
}

// A fresh path under the temp folder, unique to this test process.
inline std::filesystem::path temp_path(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() / ("pl_cli_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(p);
  return p;
}

}  // namespace cli_test
