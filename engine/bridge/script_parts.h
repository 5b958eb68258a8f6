// The fixed parts of the exported train.py, compiled in from engine/bridge/script/*.py.part (sources.cmake).
#pragma once

namespace engine::script_parts {
extern const char* const setup;        // imports, options, the precision helpers, the parameters
extern const char* const batches;      // batches.txt
extern const char* const data_images;  // image sets: pixels and the lab's table
extern const char* const data_flat;    // flat sets (and images kept as floats)
extern const char* const data_text;    // text sets: the token stream
extern const char* const blocks;       // attention and the pre-LayerNorm block
extern const char* const train;        // loss, optimizer, schedule, clipping, loss scaling, the loop
}  // namespace engine::script_parts
