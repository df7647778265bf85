// wordfreq.cpp — the C++ program of bench/tolerance: reads text, counts
// words in a std::map, keeps the lines in a std::vector<std::string>, builds
// an index of word -> line numbers, and prints the 40 most frequent words
// with their first lines and a checksum of all counts. Deterministic; allocation-heavy (node maps,
// strings, vectors), as real C++ is.
#include <algorithm>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

int main()
{
	std::ios::sync_with_stdio(false);
	std::vector<std::string> lines;
	std::map<std::string, long> freq;
	std::map<std::string, std::vector<long>> where;
	std::string line;
	while (std::getline(std::cin, line)) {
		std::istringstream in(line);
		std::string w;
		while (in >> w) {
			freq[w]++;
			auto &v = where[w];
			if (v.size() < 8)
				v.push_back((long)lines.size());
		}
		lines.push_back(line);
	}
	std::vector<std::pair<long, std::string>> top;
	for (const auto &kv : freq)
		top.emplace_back(-kv.second, kv.first);
	std::sort(top.begin(), top.end());
	for (size_t i = 0; i < top.size() && i < 40; i++) {
		const std::string &w = top[i].second;
		std::cout << w << ' ' << -top[i].first << " :";
		for (long n : where[w])
			std::cout << ' ' << n;
		std::cout << " | " << lines[(size_t)where[w][0]].substr(0, 30) << '\n';
	}
	// A checksum over every word and count: a corrupted key anywhere shows.
	unsigned long long h = 1469598103934665603ULL;
	for (const auto &kv : freq) {
		for (unsigned char c : kv.first)
			h = (h ^ c) * 1099511628211ULL;
		h = (h ^ (unsigned long long)kv.second) * 1099511628211ULL;
	}
	std::cout << "lines " << lines.size() << " words " << freq.size() << " checksum " << h << '\n';
	return 0;
}
