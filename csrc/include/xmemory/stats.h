// Small statistics helpers shared by CPU kernels.
#pragma once
#include <algorithm>
#include <vector>

namespace xmem {

// Median of v (mean of the two middle values for an even count, as NumPy). v is reordered.
inline double median_inplace(std::vector<double>& v) {
  const size_t n = v.size();
  if (n == 0) return 0.0;
  auto mid = v.begin() + n / 2;
  std::nth_element(v.begin(), mid, v.end());
  double hi = *mid;
  if (n % 2 == 1) return hi;
  double lo = *std::max_element(v.begin(), mid);
  return 0.5 * (lo + hi);
}

}  // namespace xmem
