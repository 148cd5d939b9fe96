#include "dpkit/models/wide/movielens.h"

#include <fstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dpkit::models::wide {

absl::StatusOr<MovieLensData> ReadMovieLensRatings(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read MovieLens file ", path));
  MovieLensData data;
  absl::flat_hash_map<int64_t, int32_t> users, movies;
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> fields = absl::StrSplit(line, "::");
    auto error = [&](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": ", what));
    };
    if (fields.size() != 4) {
      return error(absl::StrCat("expected UserID::MovieID::Rating::Timestamp, got ",
                                fields.size(), " fields"));
    }
    int64_t user, movie, timestamp;
    int rating;
    if (!absl::SimpleAtoi(fields[0], &user) || user < 1) return error("UserID must be an integer >= 1");
    if (!absl::SimpleAtoi(fields[1], &movie) || movie < 1) {
      return error("MovieID must be an integer >= 1");
    }
    if (!absl::SimpleAtoi(fields[2], &rating) || rating < 1 || rating > 5) {
      return error(absl::StrCat("Rating must be an integer in [1, 5], got '", fields[2], "'"));
    }
    if (!absl::SimpleAtoi(fields[3], &timestamp)) return error("Timestamp must be an integer");
    auto [u, new_user] = users.try_emplace(user, data.num_users);
    if (new_user) ++data.num_users;
    auto [m, new_movie] = movies.try_emplace(movie, data.num_movies);
    if (new_movie) ++data.num_movies;
    data.ratings.push_back({u->second, m->second, static_cast<float>(rating)});
  }
  if (data.ratings.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no ratings"));
  return data;
}

}  // namespace dpkit::models::wide
