// torch.topk's CPU selection as plain code that runs on the host and on a CUDA device, so that
// every backend breaks ties among equal scores as the official code does (docs/numerics.md
// "Top-k"). torch fills (value, index) pairs in index order and runs libstdc++'s
// std::partial_sort (when 64 k <= n) or std::nth_element at k - 1 followed, when sorted, by
// std::sort of the first k - 1, comparing values only (NaN first). Which of several equal values
// end up in the first k depends on every step of those algorithms, so they are followed here step
// by step: introselect (median-of-three pivots, unguarded partitions, a heap select once the
// depth limit is spent, insertion sort of the last <= 3), heap select + heap sort, and introsort
// with its final insertion sort (threshold 16). The same steps on the same input give the same
// permutation; tests/engine/torch_topk_test.cpp checks it against torch's own answers and against
// the standard library's algorithms on tie-heavy rows.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FD_HOST_DEVICE __host__ __device__
#else
#define FD_HOST_DEVICE
#endif

namespace flashdesk::torch_select {

struct Scored {
  float value;
  int32_t index;
};

// torch's order for topk(largest=True): larger first, NaN before everything.
FD_HOST_DEVICE inline bool before(const Scored& x, const Scored& y) {
  const bool x_nan = x.value != x.value, y_nan = y.value != y.value;
  return (x_nan && !y_nan) || x.value > y.value;
}

FD_HOST_DEVICE inline void swap(Scored* a, Scored* b) {
  const Scored t = *a;
  *a = *b;
  *b = t;
}

// floor(log2(n)) for n > 0 (std::__lg).
FD_HOST_DEVICE inline int64_t floor_log2(int64_t n) {
  int64_t r = 0;
  while (n > 1) n >>= 1, ++r;
  return r;
}

// ---- binary heap with `before` at the top (std::__push_heap, __adjust_heap, __pop_heap) ----

FD_HOST_DEVICE inline void push_up(Scored* first, int64_t hole, int64_t top, Scored value) {
  int64_t parent = (hole - 1) / 2;
  while (hole > top && before(first[parent], value)) {
    first[hole] = first[parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  first[hole] = value;
}

FD_HOST_DEVICE inline void sift_down(Scored* first, int64_t hole, int64_t len, Scored value) {
  const int64_t top = hole;
  int64_t child = hole;
  while (child < (len - 1) / 2) {
    child = 2 * (child + 1);
    if (before(first[child], first[child - 1])) --child;
    first[hole] = first[child];
    hole = child;
  }
  if ((len & 1) == 0 && child == (len - 2) / 2) {
    child = 2 * (child + 1);
    first[hole] = first[child - 1];
    hole = child - 1;
  }
  push_up(first, hole, top, value);
}

// Moves the heap's top to *result and puts *result's old value into the heap [first, last).
FD_HOST_DEVICE inline void pop_to(Scored* first, Scored* last, Scored* result) {
  const Scored value = *result;
  *result = *first;
  sift_down(first, 0, last - first, value);
}

FD_HOST_DEVICE inline void make_heap(Scored* first, Scored* last) {
  const int64_t len = last - first;
  if (len < 2) return;
  for (int64_t parent = (len - 2) / 2;; --parent) {
    sift_down(first, parent, len, first[parent]);
    if (parent == 0) return;
  }
}

FD_HOST_DEVICE inline void heap_select(Scored* first, Scored* middle, Scored* last) {
  make_heap(first, middle);
  for (Scored* i = middle; i < last; ++i)
    if (before(*i, *first)) pop_to(first, middle, i);
}

FD_HOST_DEVICE inline void sort_heap(Scored* first, Scored* last) {
  while (last - first > 1) {
    --last;
    pop_to(first, last, last);
  }
}

// ---- quicksort pieces (std::__move_median_to_first, __unguarded_partition[_pivot]) ----

FD_HOST_DEVICE inline void move_median_to_first(Scored* result, Scored* a, Scored* b, Scored* c) {
  if (before(*a, *b)) {
    if (before(*b, *c))
      swap(result, b);
    else if (before(*a, *c))
      swap(result, c);
    else
      swap(result, a);
  } else if (before(*a, *c)) {
    swap(result, a);
  } else if (before(*b, *c)) {
    swap(result, c);
  } else {
    swap(result, b);
  }
}

FD_HOST_DEVICE inline Scored* partition_around(Scored* first, Scored* last, const Scored* pivot) {
  while (true) {
    while (before(*first, *pivot)) ++first;
    --last;
    while (before(*pivot, *last)) --last;
    if (!(first < last)) return first;
    swap(first, last);
    ++first;
  }
}

FD_HOST_DEVICE inline Scored* partition_pivot(Scored* first, Scored* last) {
  Scored* mid = first + (last - first) / 2;
  move_median_to_first(first, first + 1, mid, last - 1);
  return partition_around(first + 1, last, first);
}

// ---- insertion sorts (std::__insertion_sort, __unguarded_linear_insert) ----

FD_HOST_DEVICE inline void linear_insert(Scored* last) {
  const Scored value = *last;
  Scored* next = last - 1;
  while (before(value, *next)) {
    *last = *next;
    last = next;
    --next;
  }
  *last = value;
}

FD_HOST_DEVICE inline void insertion_sort(Scored* first, Scored* last) {
  if (first == last) return;
  for (Scored* i = first + 1; i != last; ++i) {
    if (before(*i, *first)) {
      const Scored value = *i;
      for (Scored* p = i; p != first; --p) *p = *(p - 1);
      *first = value;
    } else {
      linear_insert(i);
    }
  }
}

constexpr int64_t kSortThreshold = 16;

// std::sort (introsort, then the final insertion sort). The recursion on the upper part becomes a
// stack: the parts are disjoint, so the order they are finished in does not change the result.
FD_HOST_DEVICE inline void sort(Scored* first, Scored* last) {
  if (first == last) return;
  struct Part {
    Scored *first, *last;
    int64_t depth;
  };
  Part stack[128];
  int top = 0;
  stack[top++] = Part{first, last, floor_log2(last - first) * 2};
  while (top > 0) {
    Part p = stack[--top];
    while (p.last - p.first > kSortThreshold) {
      if (p.depth == 0) {
        heap_select(p.first, p.last, p.last);
        sort_heap(p.first, p.last);
        break;
      }
      --p.depth;
      Scored* cut = partition_pivot(p.first, p.last);
      stack[top++] = Part{cut, p.last, p.depth};
      p.last = cut;
    }
  }
  if (last - first > kSortThreshold) {
    insertion_sort(first, first + kSortThreshold);
    for (Scored* i = first + kSortThreshold; i != last; ++i) linear_insert(i);
  } else {
    insertion_sort(first, last);
  }
}

// std::nth_element(first, nth, last) (introselect).
FD_HOST_DEVICE inline void nth_element(Scored* first, Scored* nth, Scored* last) {
  if (first == last || nth == last) return;
  int64_t depth = floor_log2(last - first) * 2;
  while (last - first > 3) {
    if (depth == 0) {
      heap_select(first, nth + 1, last);
      swap(first, nth);
      return;
    }
    --depth;
    Scored* cut = partition_pivot(first, last);
    if (cut <= nth)
      first = cut;
    else
      last = cut;
  }
  insertion_sort(first, last);
}

// Permutes pairs [0, n) (filled with (value[i], i) in index order) so that its first k are the
// ones torch.topk(largest=True, sorted) returns, in its order. 0 <= k <= n.
FD_HOST_DEVICE inline void select(Scored* pairs, int64_t n, int64_t k, bool sorted) {
  if (k <= 0) return;
  if (k * 64 <= n) {
    heap_select(pairs, pairs + k, pairs + n);
    sort_heap(pairs, pairs + k);
  } else {
    nth_element(pairs, pairs + (k - 1), pairs + n);
    if (sorted) sort(pairs, pairs + (k - 1));
  }
}

}  // namespace flashdesk::torch_select
