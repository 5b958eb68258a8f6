// Must NOT compile: engine/numeric sits at the bottom of the stack, so its
// library does not see the layers above it. test_layering builds this file
// against engine_numeric alone and passes when the build fails.
#include "nn/layer.h"

int main() { return 0; }
