// MovieLens 1M ratings (https://grouplens.org/datasets/movielens/1m/, file
// `ml-1m/ratings.dat`): one rating per line, `UserID::MovieID::Rating::Timestamp`,
// ratings 1..5 (1,000,209 lines, 6,040 users, 3,706 rated movies).
#ifndef DPKIT_MODELS_WIDE_MOVIELENS_H_
#define DPKIT_MODELS_WIDE_MOVIELENS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dpkit::models::wide {

struct Rating {
  int32_t user;   // dense index in [0, num_users)
  int32_t movie;  // dense index in [0, num_movies)
  float rating;   // 1..5
};

struct MovieLensData {
  std::vector<Rating> ratings;  // file order
  int32_t num_users = 0;
  int32_t num_movies = 0;
};

// Reads ratings.dat; user and movie ids are remapped to dense indices in order of first
// appearance. Errors name the line: not four '::'-separated fields, a non-integer or
// non-positive id, a rating outside 1..5. NotFound if unreadable.
absl::StatusOr<MovieLensData> ReadMovieLensRatings(const std::string& path);

}  // namespace dpkit::models::wide

#endif  // DPKIT_MODELS_WIDE_MOVIELENS_H_
