// Dense matrices for the solver: random with a chosen condition number, Matrix Market files.
#include "solve/matrix.h"

#include "numeric/clones.h"
#include "solve/kernels.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace engine {

namespace {

// Standard normal values by Box-Muller from a 64-bit Mersenne Twister:
// std::normal_distribution's algorithm is the library's choice, this is
// the same on every platform.
class Normal {
 public:
  explicit Normal(std::uint64_t seed) : m_gen(seed) {}
  double operator()() {
    if (m_has_spare) {
      m_has_spare = false;
      return m_spare;
    }
    // u1 in (0, 1]: 53 random bits, never 0 so the log is finite.
    const double u1 = (static_cast<double>(m_gen() >> 11) + 1.0) * 0x1p-53;
    const double u2 = static_cast<double>(m_gen() >> 11) * 0x1p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    m_spare = r * std::sin(2.0 * M_PI * u2);
    m_has_spare = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  std::mt19937_64 m_gen;
  double m_spare = 0.0;
  bool m_has_spare = false;
};

// The orthogonal factor Q = H_0 H_1 ... H_{n-1} of a Householder QR, kept
// as its reflectors H_k = I - tau_k v_k v_k^T.
struct Reflectors {
  std::int64_t n = 0;
  std::vector<double> v;    // reflector k: v[k * n + i] for i >= k (v_k[k] = 1)
  std::vector<double> tau;  // H_k = I - tau_k v_k v_k^T
};

// H_k applied to one column c (length n): c -= tau v (v^T c), over i >= k.
void reflect_column(const Reflectors& q, std::int64_t k, double* c) {
  const std::int64_t n = q.n;
  const double tau = q.tau[static_cast<std::size_t>(k)];
  if (tau == 0.0) return;
  const double* v = q.v.data() + k * n;
  double dot = 0.0;
  for (std::int64_t i = k; i < n; ++i) dot += v[i] * c[i];
  const double s = tau * dot;
  for (std::int64_t i = k; i < n; ++i) c[i] -= s * v[i];
}

// reflect_column on the four columns c, c + n, c + 2n, c + 3n: each
// column's sums and updates exactly as reflect_column's.
void reflect_columns4(const Reflectors& q, std::int64_t k, double* c) {
  const std::int64_t n = q.n;
  const double tau = q.tau[static_cast<std::size_t>(k)];
  if (tau == 0.0) return;
  const double* v = q.v.data() + k * n;
  double* c0 = c;
  double* c1 = c + n;
  double* c2 = c + 2 * n;
  double* c3 = c + 3 * n;
  double d0 = 0.0, d1 = 0.0, d2 = 0.0, d3 = 0.0;
  for (std::int64_t i = k; i < n; ++i) {
    const double vi = v[i];
    d0 += vi * c0[i];
    d1 += vi * c1[i];
    d2 += vi * c2[i];
    d3 += vi * c3[i];
  }
  const double s0 = tau * d0, s1 = tau * d1, s2 = tau * d2, s3 = tau * d3;
  for (std::int64_t i = k; i < n; ++i) {
    const double vi = v[i];
    c0[i] -= s0 * vi;
    c1[i] -= s1 * vi;
    c2[i] -= s2 * vi;
    c3[i] -= s3 * vi;
  }
}

// Householder QR of an n x n matrix stored by columns (column j is
// cols[j * n .. j * n + n), overwritten by R): LAPACK's dgeqr2 reflectors.
// The columns right of a group of 32 reflectors take the group's
// reflectors one column at a time while the column sits in cache; each
// column sees the same operations in the same order as one reflector at a
// time over the whole matrix would give it.
Reflectors householder_qr(std::vector<double>& cols, std::int64_t n) {
  constexpr std::int64_t kGroup = 32;
  Reflectors r;
  r.n = n;
  r.v.assign(static_cast<std::size_t>(n * n), 0.0);
  r.tau.assign(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t k0 = 0; k0 < n; k0 += kGroup) {
    const std::int64_t k1 = std::min(n, k0 + kGroup);
    for (std::int64_t k = k0; k < k1; ++k) {
      double* x = cols.data() + k * n;
      for (std::int64_t p = k0; p < k; ++p) reflect_column(r, p, x);
      double norm2 = 0.0;
      for (std::int64_t i = k; i < n; ++i) norm2 += x[i] * x[i];
      const double norm = std::sqrt(norm2);
      double* v = r.v.data() + k * n;
      if (norm == 0.0) continue;  // tau 0: H_k = I
      // alpha = -sign(x_k) ||x||: v = x - alpha e_k without cancellation.
      const double alpha = x[k] >= 0.0 ? -norm : norm;
      const double v0 = x[k] - alpha;
      v[k] = 1.0;
      for (std::int64_t i = k + 1; i < n; ++i) v[i] = x[i] / v0;
      r.tau[static_cast<std::size_t>(k)] = -v0 / alpha;  // = 2 / (v^T v) with v_k = 1
      x[k] = alpha;
      for (std::int64_t i = k + 1; i < n; ++i) x[i] = 0.0;
    }
    // Four columns at a time: four dot products in flight instead of one
    // waiting on each addition's latency, each still summed in order.
    const std::int64_t rest = n - k1, quads = rest / 4;
#pragma omp parallel for schedule(static) if (n - k1 > 64)
    for (std::int64_t q = 0; q < quads; ++q)
      for (std::int64_t k = k0; k < k1; ++k) reflect_columns4(r, k, cols.data() + (k1 + 4 * q) * n);
    for (std::int64_t j = k1 + 4 * quads; j < n; ++j)
      for (std::int64_t k = k0; k < k1; ++k) reflect_column(r, k, cols.data() + j * n);
  }
  return r;
}

// One chunk of B's columns [j0, j1) (j1 - j0 <= 64) through all the
// reflectors (vectorized across the columns in the clones: each column's
// sums stay in order, so every clone gives the same bits).
PL_CPU_CLONES void apply_chunk(const Reflectors& q, std::int64_t first, std::int64_t step, double* b, std::int64_t j0,
                               std::int64_t j1) {
  const std::int64_t n = q.n;
  double wc[64];
  for (std::int64_t t = 0, k = first; t < n; ++t, k += step) {
    const double tau = q.tau[static_cast<std::size_t>(k)];
    if (tau == 0.0) continue;
    const double* v = q.v.data() + k * n;
    for (std::int64_t j = j0; j < j1; ++j) wc[j - j0] = 0.0;
    for (std::int64_t i = k; i < n; ++i) {
      const double vi = v[i];
      const double* row = b + i * n;
      for (std::int64_t j = j0; j < j1; ++j) wc[j - j0] += vi * row[j];
    }
    for (std::int64_t i = k; i < n; ++i) {
      const double s = tau * v[i];
      double* row = b + i * n;
      for (std::int64_t j = j0; j < j1; ++j) row[j] -= s * wc[j - j0];
    }
  }
}

// B (n x n, row-major) = H_k B for k = first, first + step, ... (step +-1,
// count reflectors), each H_k B[k:, :] -= tau v (v^T B[k:, :]). The threads
// own chunks of 64 columns, and each chunk takes every reflector in turn
// while it is in cache: the sums' order depends on neither the thread
// count nor the chunking.
void apply_reflectors(const Reflectors& q, std::int64_t first, std::int64_t step, std::vector<double>& b) {
  const std::int64_t n = q.n;
  constexpr std::int64_t kChunk = 64;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(dynamic, 1) if (n > 64)
  for (std::int64_t c = 0; c < chunks; ++c)
    apply_chunk(q, first, step, b.data(), c * kChunk, std::min(n, c * kChunk + kChunk));
}

[[noreturn]] void fail_at(const std::string& name, std::int64_t line, const std::string& what) {
  throw std::runtime_error(name + ":" + std::to_string(line) + ": " + what);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Splits on blanks and tabs.
std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    const std::size_t s = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > s) out.push_back(line.substr(s, i - s));
  }
  return out;
}

bool parse_int(std::string_view s, std::int64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  std::int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

bool parse_real(std::string_view s, double& out) {
  if (s.empty() || s.size() > 64) return false;
  const std::string t(s);
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return false;
  // strtod accepts "nan", "inf", hex floats: the finite check drops the
  // first two; a hex float is still a number.
  out = v;
  return true;
}

}  // namespace

Matrix random_matrix(std::int64_t n, double cond, std::uint64_t seed) {
  if (n < 1 || n > kMaxSolveN)
    throw std::invalid_argument("n must be in 1.." + std::to_string(kMaxSolveN) + " (got " + std::to_string(n) + ")");
  if (!(cond >= 1.0) || !std::isfinite(cond))
    throw std::invalid_argument("the condition number must be a finite number >= 1");
  const std::size_t nn = static_cast<std::size_t>(n * n);
  // Two Gaussian matrices from one stream: U's first, then V's.
  Normal normal(seed);
  std::vector<double> gu(nn), gv(nn);
  for (double& x : gu) x = normal();
  for (double& x : gv) x = normal();
  const Reflectors u = householder_qr(gu, n);
  const Reflectors v = householder_qr(gv, n);
  gu.clear();
  gu.shrink_to_fit();
  gv.clear();
  gv.shrink_to_fit();

  // B = V^T = H_{n-1} ... H_0 I (each H_k symmetric), then diag(sigma) B,
  // then A = U B = H_0 (H_1 (... H_{n-1} B)).
  Matrix m;
  m.n = n;
  m.a.assign(nn, 0.0);
  for (std::int64_t i = 0; i < n; ++i) m.at(i, i) = 1.0;
  apply_reflectors(v, 0, 1, m.a);
  for (std::int64_t i = 0; i < n; ++i) {
    const double sigma = n == 1 ? 1.0 : std::pow(cond, -static_cast<double>(i) / static_cast<double>(n - 1));
    for (std::int64_t j = 0; j < n; ++j) m.at(i, j) *= sigma;
  }
  apply_reflectors(u, n - 1, -1, m.a);
  return m;
}

std::vector<double> random_vector(std::int64_t n, std::uint64_t seed) {
  Normal normal(seed);
  std::vector<double> x(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
  for (double& v : x) v = normal();
  return x;
}

Matrix parse_matrix_market(const std::string& text, const std::string& name, std::int64_t max_n) {
  std::size_t pos = 0;
  std::int64_t line_no = 0;
  auto next_line = [&](std::string_view& line) {
    if (pos >= text.size()) return false;
    std::size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    line = std::string_view(text).substr(pos, e - pos);
    pos = e + 1;
    ++line_no;
    return true;
  };
  std::string_view line;
  if (!next_line(line)) fail_at(name, 1, "empty file, expected a %%MatrixMarket header");
  const auto head = fields(line);
  if (head.size() != 5 || head[0] != "%%MatrixMarket")
    fail_at(name, line_no, "expected '%%MatrixMarket matrix coordinate|array real|integer general|symmetric'");
  const std::string object = lower(std::string(head[1])), layout = lower(std::string(head[2])),
                    field = lower(std::string(head[3])), symmetry = lower(std::string(head[4]));
  if (object != "matrix") fail_at(name, line_no, "object '" + object + "' is not 'matrix'");
  if (layout != "coordinate" && layout != "array")
    fail_at(name, line_no, "format '" + layout + "' is neither 'coordinate' nor 'array'");
  if (field != "real" && field != "integer" && field != "double")
    fail_at(name, line_no, "field '" + field + "': only real and integer matrices can be solved");
  if (symmetry != "general" && symmetry != "symmetric" && symmetry != "skew-symmetric")
    fail_at(name, line_no, "symmetry '" + symmetry + "' is not general, symmetric or skew-symmetric");
  const bool coordinate = layout == "coordinate";
  const bool symmetric = symmetry == "symmetric", skew = symmetry == "skew-symmetric";

  // The size line, after comments and blank lines.
  std::vector<std::string_view> f;
  for (;;) {
    if (!next_line(line)) fail_at(name, line_no, "the file ends before the size line");
    if (!line.empty() && line[0] == '%') continue;
    f = fields(line);
    if (!f.empty()) break;
  }
  std::int64_t rows = 0, cols = 0, count = 0;
  if (f.size() != (coordinate ? 3u : 2u) || !parse_int(f[0], rows) || !parse_int(f[1], cols) ||
      (coordinate && !parse_int(f[2], count)))
    fail_at(name, line_no, coordinate ? "size line must be 'rows cols entries'" : "size line must be 'rows cols'");
  if (rows != cols)
    fail_at(name, line_no, "matrix is " + std::to_string(rows) + " x " + std::to_string(cols) + ", not square");
  if (rows < 1 || rows > max_n)
    fail_at(name, line_no, "size " + std::to_string(rows) + " is outside 1.." + std::to_string(max_n));
  const std::int64_t n = rows;
  const std::int64_t max_entries = coordinate ? n * n : ((symmetric || skew) ? n * (n + 1) / 2 : n * n);
  if (coordinate && count > max_entries)
    fail_at(name, line_no, std::to_string(count) + " entries is more than an n x n matrix holds");
  if (!coordinate) count = skew ? n * (n - 1) / 2 : max_entries;
  // Every entry takes at least 4 bytes of text ("1 1 0" less a byte for the
  // last newline; an array value at least 2): a count the file cannot hold
  // fails here, before n^2 doubles are allocated.
  const std::size_t min_bytes = static_cast<std::size_t>(count) * (coordinate ? 5u : 2u);
  if (text.size() - std::min(text.size(), pos) + 1 < min_bytes)
    fail_at(name, line_no, "the file is too short for " + std::to_string(count) + " entries");

  Matrix m;
  m.n = n;
  m.a.assign(static_cast<std::size_t>(n * n), 0.0);
  std::int64_t read = 0;
  // Array order: column-major; symmetric: the lower triangle (skew: strictly lower).
  std::int64_t ai = 0, aj = 0;
  if (!coordinate && skew) ai = 1;
  while (read < count) {
    if (!next_line(line))
      fail_at(name, line_no, "the file ends after " + std::to_string(read) + " of " + std::to_string(count) + " entries");
    if (!line.empty() && line[0] == '%') continue;
    f = fields(line);
    if (f.empty()) continue;
    std::int64_t i = 0, j = 0;
    double value = 0.0;
    if (coordinate) {
      if (f.size() != 3) fail_at(name, line_no, "an entry must be 'row col value'");
      if (!parse_int(f[0], i) || i < 1 || i > n)
        fail_at(name, line_no, "row '" + std::string(f[0]) + "' is not in 1.." + std::to_string(n));
      if (!parse_int(f[1], j) || j < 1 || j > n)
        fail_at(name, line_no, "column '" + std::string(f[1]) + "' is not in 1.." + std::to_string(n));
      if (!parse_real(f[2], value)) fail_at(name, line_no, "value '" + std::string(f[2]) + "' is not a finite number");
      --i;
      --j;
      if ((symmetric || skew) && j > i) fail_at(name, line_no, "a symmetric file holds only the lower triangle (row >= col)");
      if (skew && i == j) fail_at(name, line_no, "a skew-symmetric matrix has no diagonal entries");
    } else {
      if (f.size() != 1) fail_at(name, line_no, "an array entry must be one value");
      if (!parse_real(f[0], value)) fail_at(name, line_no, "value '" + std::string(f[0]) + "' is not a finite number");
      i = ai;
      j = aj;
      if (++ai == n) {
        ++aj;
        ai = (symmetric) ? aj : (skew ? aj + 1 : 0);
      }
    }
    m.at(i, j) += value;
    if ((symmetric || skew) && i != j) m.at(j, i) += skew ? -value : value;
    ++read;
  }
  // Anything but comments and blank lines after the last entry is an error.
  while (next_line(line)) {
    if (!line.empty() && line[0] == '%') continue;
    if (!fields(line).empty()) fail_at(name, line_no, "more entries than the size line's " + std::to_string(count));
  }
  for (double x : m.a)
    if (!std::isfinite(x)) fail_at(name, line_no, "duplicate entries add up to a value that is not finite");
  return m;
}

Matrix read_matrix_market(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_matrix_market(ss.str(), path);
}

std::vector<double> read_vector(const std::string& path, std::int64_t n) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the file");
  std::vector<double> x;
  std::string line;
  std::int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const auto f = fields(line);
    if (f.empty() || f[0][0] == '#' || f[0][0] == '%') continue;
    if (f.size() != 1) fail_at(path, line_no, "expected one value a line");
    double v = 0.0;
    if (!parse_real(f[0], v)) fail_at(path, line_no, "value '" + std::string(f[0]) + "' is not a finite number");
    if (static_cast<std::int64_t>(x.size()) == n)
      fail_at(path, line_no, "more values than the matrix's " + std::to_string(n) + " rows");
    x.push_back(v);
  }
  if (static_cast<std::int64_t>(x.size()) != n)
    throw std::runtime_error(path + ": " + std::to_string(x.size()) + " values, the matrix has " + std::to_string(n) +
                             " rows");
  return x;
}

double norm_inf(const Matrix& m) {
  double best = 0.0;
  for (std::int64_t i = 0; i < m.n; ++i) {
    double s = 0.0;
    for (std::int64_t j = 0; j < m.n; ++j) s += std::fabs(m.at(i, j));
    best = std::max(best, s);
  }
  return best;
}

double norm_inf(const std::vector<double>& x) {
  double best = 0.0;
  for (double v : x) best = std::max(best, std::fabs(v));
  return best;
}

void matvec(const Matrix& m, const double* x, double* y) { solve_kernels::matvec_dd(m.a.data(), m.n, x, y); }

}  // namespace engine
