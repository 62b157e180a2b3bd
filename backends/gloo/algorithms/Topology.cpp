// Which ranks an algorithm runs over: teams, the hosts, and whether the layered (hierarchical)
// algorithms pay.

#include <algorithm>

#include "backends/gloo/algorithms/MeshAlgorithms.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

MeshAlgorithms::MeshAlgorithms(SyncMesh& mesh)
    : mesh_(mesh), rank_(mesh.rank()), size_(mesh.size()) {
  std::vector<int> everyone(size_);
  for (int r = 0; r < size_; ++r) everyone[r] = r;
  all_ = teamOf(everyone);
  host_ = all_;
  hostOfRank_.assign(size_, 0);
}

MeshAlgorithms::Team MeshAlgorithms::teamOf(std::vector<int> ranks) const {
  Team team;
  team.ranks = std::move(ranks);
  auto at = std::find(team.ranks.begin(), team.ranks.end(), rank_);
  team.me = at == team.ranks.end() ? -1 : static_cast<int>(at - team.ranks.begin());
  return team;
}

MeshAlgorithms::Team MeshAlgorithms::representatives(int root) const {
  std::vector<int> reps(hosts_, -1);
  for (int r = 0; r < size_; ++r) {
    if (reps[hostOfRank_[r]] < 0) reps[hostOfRank_[r]] = r;
  }
  if (root >= 0) reps[hostOfRank_[root]] = root;
  return teamOf(std::move(reps));
}

int MeshAlgorithms::indexOnHost(int rep) const {
  return static_cast<int>(std::find(host_.ranks.begin(), host_.ranks.end(), rep) -
                          host_.ranks.begin());
}

int MeshAlgorithms::crossings(const std::vector<int>& hostOfRank, const std::vector<int>& members) {
  const int n = static_cast<int>(members.size());
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  auto apart = [&](int a, int b) { return hostOfRank[members[a]] != hostOfRank[members[b]]; };
  int count = 0;
  for (int i = 0; i < n - pow2; ++i) {
    if (apart(i, i + pow2)) {
      count += 2;  // the fold and the unfold
      break;
    }
  }
  for (int distance = 1; distance < pow2; distance *= 2) {
    for (int i = 0; i < pow2; ++i) {
      if (apart(i, i ^ distance)) {
        ++count;
        break;
      }
    }
  }
  return count;
}

std::string MeshAlgorithms::setHosts(const std::vector<int>& hostOfRank, Hierarchy hierarchy) {
  hostOfRank_ = hostOfRank;
  hosts_ = 1 + *std::max_element(hostOfRank_.begin(), hostOfRank_.end());
  ranksOfHost_.assign(hosts_, {});
  for (int r = 0; r < size_; ++r) ranksOfHost_[hostOfRank_[r]].push_back(r);
  host_ = teamOf(ranksOfHost_[hostOfRank_[rank_]]);
  if (hosts_ == 1) return "";
  // With one rank per host there is nothing to do within hosts: flat is the same.
  leaders_ = representatives(-1);
  const int flat = crossings(hostOfRank_, all_.ranks);
  const int layered = crossings(hostOfRank_, leaders_.ranks);
  hierarchical_ = hosts_ < size_ &&
                  (hierarchy == Hierarchy::On || (hierarchy == Hierarchy::Auto && layered < flat));
  std::string ranks;
  for (int r : host_.ranks) ranks += detail::concat(ranks.empty() ? "" : ", ", r);
  const char* why = hierarchy == Hierarchy::On    ? "C10D_GLOO_HIERARCHICAL=1"
                    : hierarchy == Hierarchy::Off ? "C10D_GLOO_HIERARCHICAL=0 on some rank"
                                                  : "auto";
  return detail::concat(hosts_, " hosts (this one: rank(s) ", ranks,
                        "); allreduce, broadcast, reduce, allgather and reduce_scatter ",
                        hierarchical_ ? "are hierarchical" : "are flat over every rank", " (", why,
                        "; their messages cross hosts ", layered, " times in turn hierarchical, ",
                        flat, " flat)");
}

}  // namespace c10d::inline v1
