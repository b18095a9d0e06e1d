// Copies of Cap'n Proto lists into STL containers (their iterators lack iterator_category).
#pragma once
#include <vector>

namespace leap {

template <class T, class List>
std::vector<T> to_vector(List list) {
  std::vector<T> v;
  v.reserve(list.size());
  for (auto x : list) v.push_back(x);
  return v;
}

}  // namespace leap
