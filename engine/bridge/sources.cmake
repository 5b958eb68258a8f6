# engine/bridge: run folders carried to PyTorch (export-pytorch). The fixed
# parts of the exported script are Python files compiled in as strings.
set(_pl_parts setup batches data_images data_flat data_text blocks train)
set(_pl_text "// Generated from engine/bridge/script/*.py.part by engine/bridge/sources.cmake.\n#include \"bridge/script_parts.h\"\n\nnamespace engine::script_parts {\n")
foreach(_p ${_pl_parts})
  set(_src ${CMAKE_CURRENT_SOURCE_DIR}/bridge/script/${_p}.py.part)
  file(READ ${_src} _body)
  string(APPEND _pl_text "const char* const ${_p} = R\"PLPY(${_body})PLPY\";\n")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_src})
endforeach()
string(APPEND _pl_text "}  // namespace engine::script_parts\n")
set(_pl_gen ${CMAKE_BINARY_DIR}/generated/bridge/script_parts.cpp)
file(WRITE ${_pl_gen}.new "${_pl_text}")
configure_file(${_pl_gen}.new ${_pl_gen} COPYONLY)
target_sources(engine_bridge PRIVATE bridge/translation.cpp bridge/pytorch_script.cpp bridge/pytorch_export.cpp
                                     ${_pl_gen})
