// Dense square matrices for the solver: random ones of a chosen condition
// number, and any real square matrix from a Matrix Market (.mtx) file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace engine {

// An n x n matrix of doubles, row-major: a[i * n + j].
struct Matrix {
  std::int64_t n = 0;
  std::vector<double> a;
  double& at(std::int64_t i, std::int64_t j) { return a[static_cast<std::size_t>(i * n + j)]; }
  double at(std::int64_t i, std::int64_t j) const { return a[static_cast<std::size_t>(i * n + j)]; }
};

// The largest n the solver accepts (a dense n x n double matrix is 8 n^2
// bytes: 2 GiB at this size).
inline constexpr std::int64_t kMaxSolveN = 16384;

// A = U diag(sigma) V^T with sigma_i = cond^(-i / (n - 1)) (geometric
// spacing from 1 down to 1/cond, so the 2-norm condition number is cond),
// and U, V the orthogonal factors of Householder QR of two n x n matrices
// of independent standard normal entries drawn from `seed` (Box-Muller on
// std::mt19937_64, so the same seed gives the same matrix on every
// platform). O(n^3): about 7 n^3 flops. Any thread; uses the engine's
// OpenMP threads. Throws std::invalid_argument for n < 1, n > kMaxSolveN or
// cond < 1 (or not finite).
Matrix random_matrix(std::int64_t n, double cond, std::uint64_t seed);

// A vector of n standard normal values from `seed` (the exact solution the
// CLI draws when no right-hand side is given).
std::vector<double> random_vector(std::int64_t n, std::uint64_t seed);

// Reads a Matrix Market file: "%%MatrixMarket matrix coordinate|array
// real|integer general|symmetric|skew-symmetric", comment lines (%), a size
// line, then the entries (coordinate: "i j value", 1-based, duplicates
// added; array: column-major, symmetric ones their lower triangle). The
// matrix must be square with 1 <= n <= kMaxSolveN, and the size is checked
// against the file before the matrix is allocated. Throws
// std::runtime_error with one line "FILE:LINE: what is wrong" (pattern and
// complex matrices, a bad header, a missing, extra or out-of-range entry, a
// value that is not a finite number).
Matrix read_matrix_market(const std::string& path);
// The same, reading the text itself (`name` stands for the file in errors)
// and accepting n up to max_n: the fuzz target and the tests call this.
Matrix parse_matrix_market(const std::string& text, const std::string& name, std::int64_t max_n = kMaxSolveN);

// A right-hand side: one finite number a line (blank lines and lines
// starting with '#' or '%' skipped), exactly n of them. Throws
// std::runtime_error "FILE:LINE: ..." (or "FILE: ..." for a count mismatch).
std::vector<double> read_vector(const std::string& path, std::int64_t n);

// max_i sum_j |a_ij|.
double norm_inf(const Matrix& m);
double norm_inf(const std::vector<double>& x);
// y = A x in double.
void matvec(const Matrix& m, const double* x, double* y);

}  // namespace engine
