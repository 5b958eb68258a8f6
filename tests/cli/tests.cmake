# tests/cli: runs the built precision-lab-cli and checks its output and exit codes.
foreach(t test_cli_formats test_cli_compare test_cli_lecture test_cli_journal test_cli_sample test_cli_solve)
  pl_add_test(${t}
    SOURCES cli/${t}.cpp
    LIBS engine_lecture engine_journal
    LABELS cli
    TIMEOUT 300)
  add_dependencies(${t} precision-lab-cli)
  target_compile_definitions(${t} PRIVATE PL_CLI_PATH="$<TARGET_FILE:precision-lab-cli>")
endforeach()
