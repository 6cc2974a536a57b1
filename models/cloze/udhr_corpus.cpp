#include "luong/cloze/udhr_corpus.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace luong::cloze {

const std::string& udhr_text() {
  static const std::string text =
      "All human beings are born free and equal in dignity and rights.\n"
      "They are endowed with reason and conscience and should act towards one another in a spirit of brotherhood.\n"
      "Everyone has the right to life, liberty and security of person.\n"
      "No one shall be held in slavery or servitude.\n"
      "Slavery and the slave trade shall be prohibited in all their forms.\n"
      "No one shall be subjected to torture or to cruel, inhuman or degrading treatment or punishment.\n"
      "Everyone has the right to recognition everywhere as a person before the law.\n"
      "All are equal before the law and are entitled without any discrimination to equal protection of the law.\n"
      "No one shall be subjected to arbitrary arrest, detention or exile.\n"
      "Everyone has the right to freedom of movement and residence within the borders of each state.\n"
      "Everyone has the right to own property alone as well as in association with others.\n"
      "No one shall be arbitrarily deprived of his property.\n"
      "Everyone has the right to freedom of thought, conscience and religion.\n"
      "Everyone has the right to freedom of opinion and expression.\n"
      "Everyone has the right to rest and leisure, including reasonable limitation of working hours and periodic "
      "holidays with pay.\n"
      "Everyone has the right to education.\n";
  return text;
}

const std::vector<std::string>& display_sentence() {
  static const std::vector<std::string> tokens = {"all",  "human", "beings", "are", "born",    "free",
                                                  "and",  "equal", "in",     "dignity", "and", "rights"};
  return tokens;
}

std::vector<std::string> cloze_tokenize(const std::string& sentence) {
  std::vector<std::string> tokens;
  std::string current;
  for (char c : sentence) {
    const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
    if (lower >= 'a' && lower <= 'z') {
      current.push_back(lower);
    } else if (!current.empty()) {
      tokens.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) tokens.push_back(std::move(current));
  return tokens;
}

ClozeCorpus make_cloze_corpus(const std::string& text) {
  ClozeCorpus corpus;
  std::istringstream lines(text);
  std::string line;
  std::set<std::string> distinct;
  while (std::getline(lines, line)) {
    std::vector<std::string> tokens = cloze_tokenize(line);
    if (tokens.size() < 2) continue;
    distinct.insert(tokens.begin(), tokens.end());
    corpus.sentences.push_back(std::move(tokens));
  }
  corpus.vocabulary.assign(distinct.begin(), distinct.end());
  for (const auto& sentence : corpus.sentences) {
    std::vector<int> ids;
    for (const auto& token : sentence) ids.push_back(corpus.id(token));
    corpus.ids.push_back(std::move(ids));
  }
  return corpus;
}

int ClozeCorpus::id(const std::string& token) const {
  const auto it = std::lower_bound(vocabulary.begin(), vocabulary.end(), token);
  return (it != vocabulary.end() && *it == token) ? static_cast<int>(it - vocabulary.begin()) : -1;
}

}  // namespace luong::cloze
