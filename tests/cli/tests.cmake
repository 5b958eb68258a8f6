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

# export-pytorch: the run folder's initial state, the script, its list and its refusals.
pl_add_test(test_cli_export_pytorch
  SOURCES cli/test_cli_export_pytorch.cpp
  LIBS engine_journal
  LABELS cli
  TIMEOUT 300)
add_dependencies(test_cli_export_pytorch precision-lab-cli)
target_compile_definitions(test_cli_export_pytorch PRIVATE PL_CLI_PATH="$<TARGET_FILE:precision-lab-cli>")

# The PyTorch cross-check (Debian's python3-torch): skips, saying why, only
# where no Python imports torch and numpy.
pl_add_test(test_pytorch_crosscheck
  SOURCES cli/test_pytorch_crosscheck.cpp
  LIBS engine_report
  LABELS cli
  TIMEOUT 600)
add_dependencies(test_pytorch_crosscheck precision-lab-cli)
target_compile_definitions(test_pytorch_crosscheck PRIVATE PL_CLI_PATH="$<TARGET_FILE:precision-lab-cli>")

# The GPU peer's smoke test (tests/bench/pytorch_gpu_peer.py --device cpu):
# skips, saying why, where no Python imports torch.
pl_add_test(test_pytorch_gpu_peer
  SOURCES cli/test_pytorch_gpu_peer.cpp
  LABELS cli
  TIMEOUT 120)
add_dependencies(test_pytorch_gpu_peer precision-lab-cli)
target_compile_definitions(test_pytorch_gpu_peer PRIVATE PL_CLI_PATH="$<TARGET_FILE:precision-lab-cli>"
  PL_GPU_PEER_PATH="${CMAKE_SOURCE_DIR}/tests/bench/pytorch_gpu_peer.py")
