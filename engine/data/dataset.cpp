// load_dataset(): resolves a dataset spec to the built-in sets, a text file or an IDX folder.
#include "data/dataset.h"

#include <cstdint>
#include <filesystem>
#include <stdexcept>

#include "data/mnist.h"
#include "data/synthetic.h"
#include "data/text.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace engine {

void size_inputs(Dataset& d, std::size_t n) {
  d.inputs.clear();
  d.inputs.reserve(n);  // a large block is a fresh mapping, not yet touched
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(d.inputs.data());
  const std::uintptr_t lo = (begin + kHuge - 1) & ~(kHuge - 1);
  const std::uintptr_t hi = (begin + n * sizeof(float)) & ~(kHuge - 1);
  // Advice only: where it is refused the set works the same on small pages.
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#endif
  d.inputs.resize(n);  // first touch, after the advice
}

std::vector<std::string> builtin_dataset_names() { return {"fashion-mnist", "spirals", "tiny-gradients", "jargon"}; }

DatasetPair load_dataset(std::string_view spec, std::uint64_t seed, std::size_t context) {
  if (is_text_spec(spec)) return load_text_dataset(spec, context);
  if (spec == "spirals") return make_spirals(seed);
  if (spec == "tiny-gradients") return make_tiny_gradients(seed);
  if (spec == "fashion-mnist") {
    MnistOptions opt;
    opt.name = "fashion-mnist";
    opt.classes = 10;
    opt.install_hint = "install the Debian package dataset-fashion-mnist: sudo apt-get install dataset-fashion-mnist";
    return load_mnist_folder(kFashionMnistDir, opt);
  }
  const std::string dir(spec);
  if (dir.empty()) throw std::runtime_error("dataset: empty name; expected fashion-mnist, spirals, tiny-gradients, jargon, text:PATH or a folder");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw std::runtime_error(dir + ": no such dataset folder; expected fashion-mnist, spirals, "
                                   "tiny-gradients, jargon, text:PATH or a folder of MNIST-format IDX files");
  }
  MnistOptions opt;
  std::filesystem::path p(dir);
  opt.name = (p.has_filename() ? p.filename() : p.parent_path().filename()).string();
  // classes = 0: the largest training label + 1 (MNIST-format folders do not
  // record the class count; EMNIST letters has 26, MNIST 10).
  return load_mnist_folder(dir, opt);
}

}  // namespace engine
