// Stop strings over streamed text: the shown text never contains a stop string nor any part of
// one. Text that could still become a stop string (a suffix that is a prefix of one) is held back
// until the next piece decides it; when a stop string completes, the text is cut just before it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tq {

class StopStringMatcher {
 public:
  // Empty strings are ignored.
  explicit StopStringMatcher(std::vector<std::string> stops = {});

  struct Result {
    std::string_view text;  // safe to show now (valid until the next call)
    bool stopped = false;   // a stop string completed; `text` ends just before it
  };
  // Appends a piece of generated text. After a stop, further pushes return nothing.
  Result Push(std::string_view piece);
  // The end of the generation without a stop: returns the held-back text.
  std::string_view Flush();

  bool stopped() const { return stopped_; }
  bool empty() const { return stops_.empty(); }
  const std::vector<std::string>& stops() const { return stops_; }

 private:
  std::vector<std::string> stops_;
  size_t max_len_ = 0;
  std::string pending_;  // held-back text: a proper prefix of some stop string (< max_len_ bytes)
  std::string out_;
  bool stopped_ = false;
};

}  // namespace tq
