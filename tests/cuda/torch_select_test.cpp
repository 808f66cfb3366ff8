// The block version of torch's selection (engine/ops/cuda/torch_select_block.cuh) against the
// step-by-step host one (engine/util/torch_select.h, itself checked against torch and libstdc++):
// the same first k pairs on tie-heavy rows of every size class (one partition step or many,
// heap-select chunks one or many), and the same whole arrangement where introselect runs, also on
// rows that drive it into its depth-limit heap select (McIlroy's adversary). Every form of the
// steps (select_forms.h): partitions by the whole block or over runs on fewer threads as ranges
// shrink, heap steps by one thread in place, by a warp or by one thread on the heap in shared
// memory (CudaBackend::set_select_runs, set_heap_steps).
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/ops/cuda/torch_select_rows.h"
#include "engine/util/torch_select.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/select_forms.h"
#include "tests/engine/torch_select_adversary.h"

namespace flashdesk::test {
namespace {

using torch_select::Scored;

class CudaTorchSelectTest : public CudaOpTest {
 protected:
  // Rows of n values through the device; each row's result held to the host's. Returns how many
  // rows had a tie across the k-th best (the cases the choice is about).
  int check(const std::vector<std::vector<float>>& rows, int64_t k, const std::string& what) {
    const int64_t n = static_cast<int64_t>(rows[0].size()), r = static_cast<int64_t>(rows.size());
    std::vector<Scored> all;
    for (const auto& row : rows)
      for (int64_t i = 0; i < n; ++i)
        all.push_back(Scored{row[static_cast<size_t>(i)], static_cast<int32_t>(i)});
    Tensor dev = gpu().alloc(DType::U8, Shape{r, n * static_cast<int64_t>(sizeof(Scored))});
    gpu().write(dev, all.data(), dev.nbytes());
    torch_select_rows(gpu(), dev, n, k);
    std::vector<Scored> got(all.size());
    gpu().read(dev, got.data(), dev.nbytes());
    const bool heap_path = k * 64 <= n;
    int tied = 0;
    for (int64_t row = 0; row < r; ++row) {
      std::vector<Scored> want(all.begin() + row * n, all.begin() + (row + 1) * n);
      if (heap_path)
        torch_select::heap_select(want.data(), want.data() + k, want.data() + n);
      else
        torch_select::nth_element(want.data(), want.data() + (k - 1), want.data() + n);
      const Scored* g = got.data() + row * n;
      // Heap select: the same pairs in the same heap order; introselect: the whole row.
      const int64_t compared = heap_path ? k : n;
      for (int64_t j = 0; j < compared; ++j)
        if (g[j].index != want[static_cast<size_t>(j)].index) {
          ADD_FAILURE() << what << ": row " << row << " n " << n << " k " << k << " position " << j
                        << ": index " << g[j].index << ", the host has "
                        << want[static_cast<size_t>(j)].index;
          return tied;
        }
      std::vector<float> s = rows[static_cast<size_t>(row)];
      std::sort(s.begin(), s.end(), std::greater<>());
      if (k < n && s[static_cast<size_t>(k - 1)] == s[static_cast<size_t>(k)]) ++tied;
    }
    return tied;
  }

  void check_tie_heavy_rows();

  static std::vector<std::vector<float>> levels(int64_t rows, int64_t n, int distinct,
                                                uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> level(0, distinct - 1);
    std::vector<std::vector<float>> out(static_cast<size_t>(rows),
                                        std::vector<float>(static_cast<size_t>(n)));
    for (auto& row : out)
      for (float& x : row) x = static_cast<float>(level(rng)) * 0.5f - 3.0f;
    return out;
  }
};

TEST_F(CudaTorchSelectTest, TieHeavyRowsEndAsOnTheHost) {
  for (const SelectFormCase& form : kSelectForms) {  // every form of torch's selection
    SCOPED_TRACE(form.what);
    use_select_form(gpu(), form);
    check_tie_heavy_rows();
  }
}

void CudaTorchSelectTest::check_tie_heavy_rows() {
  int tied = 0, cases = 0;
  // Introselect: rows within one block step (<= 256) and over many, and (12,000) wider than
  // the 256 threads' runs take; k near both ends.
  for (const int64_t n : {5, 17, 200, 1000, 3000, 12000})
    for (const int64_t k : {int64_t{1}, n / 60 + 1, n / 2, n - 1, n})
      for (const int distinct : {2, 5, 40}) {
        if (k < 1 || k > n || k * 64 <= n) continue;
        tied += check(levels(3, n, distinct, static_cast<uint32_t>(n * 7 + k + distinct)), k,
                      "introselect");
        ++cases;
      }
  // Heap select: one chunk (4 x 256 elements) or several; heaps of one node to 625 (paths of more
  // than one six-level round, an even size's single last child; 40,000 entries: a long
  // context's decode row).
  for (const int64_t n : {640, 5000, 40000})
    for (const int64_t k : {int64_t{1}, int64_t{6}, int64_t{7}, n / 64})
      for (const int distinct : {3, 50}) {
        tied += check(levels(2, n, distinct, static_cast<uint32_t>(n + k * 31 + distinct)), k,
                      "heap select");
        ++cases;
      }
  // The indexer's candidate blocks at a 1M context: a heap of 2,048 pairs (the kernels' whole
  // shared room, two six-level rounds a step), and one past the room (the heap in place).
  for (const int64_t k : {int64_t{2048}, int64_t{2100}}) {
    tied += check(levels(1, 64 * k, 200, static_cast<uint32_t>(k)), k, "heap select, large heap");
    ++cases;
  }
  EXPECT_GT(cases, 60);
  EXPECT_GT(tied, 60) << "the rows must tie across the k-th best, or they test nothing";
}

TEST_F(CudaTorchSelectTest, DepthLimitFallbackEndsAsOnTheHost) {
  for (const SelectFormCase& form : kSelectForms) {  // every form of torch's selection
    SCOPED_TRACE(form.what);
    use_select_form(gpu(), form);
    for (const int64_t n : {300, 2000})
      for (const int64_t k : {n / 3, n - 1}) {
        const std::vector<float> v = adversarial_row(n, [&](auto& idx, auto cmp) {
          std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(), cmp);
        });
        check({v}, k, "adversarial");
      }
  }
}

}  // namespace
}  // namespace flashdesk::test
