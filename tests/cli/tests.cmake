# tests/cli: runs the built precision-lab-cli and checks its output and exit codes.
pl_add_test(test_cli_formats
  SOURCES cli/test_cli_formats.cpp
  LABELS cli
  TIMEOUT 60)
add_dependencies(test_cli_formats precision-lab-cli)
target_compile_definitions(test_cli_formats PRIVATE
  PL_CLI_PATH="$<TARGET_FILE:precision-lab-cli>")
