# tests/engine/conformance: every Backend op on every backend against the
# scalar reference. -ffp-contract=off: the reduced-precision references
# round after each multiply and add, exactly as the backends must.
pl_add_test(test_backend_conformance
  SOURCES engine/conformance/test_backend_conformance.cpp engine/conformance/host_cuda_table.cpp
  LIBS engine_train engine_backends
  LABELS engine)
set_source_files_properties(engine/conformance/test_backend_conformance.cpp
  PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
