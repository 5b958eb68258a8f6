# tests/cli: runs the built precision-lab-cli and checks its output and exit codes.
foreach(t test_cli_formats test_cli_compare)
  pl_add_test(${t}
    SOURCES cli/${t}.cpp
    LIBS engine_train
    LABELS cli
    TIMEOUT 120)
  add_dependencies(${t} precision-lab-cli)
  target_compile_definitions(${t} PRIVATE PL_CLI_PATH="$<TARGET_FILE:precision-lab-cli>")
endforeach()
