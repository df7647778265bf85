// churn: a C++ workload over the allocator (built by tests/cxx.bats with g++;
// the Makefile only builds C).  Over-aligned operator new (alignas(64) and
// alignas(4096) types, single objects, arrays and vector storage), map,
// unordered_map, list, string and shared_ptr churn, exceptions, and threads
// with thread_local objects whose destructors allocate.
// Prints a deterministic summary; exits 1 on a misaligned object.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <list>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

struct alignas(64) Line {
	std::uint64_t v[8];
};

struct alignas(4096) Page {
	unsigned char bytes[200];
};

int misaligned = 0;

template <typename T> void check_aligned(const T *p, const char *what)
{
	if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0) {
		if (misaligned++ < 5)
			std::printf("MISALIGNED %s %p (alignment %zu)\n", what, static_cast<const void *>(p), alignof(T));
	}
}

std::uint64_t next(std::uint64_t &s)
{
	s = s * 6364136223846793005ull + 1442695040888963407ull;
	return s >> 33;
}

std::uint64_t aligned_new()
{
	std::uint64_t sum = 0;
	std::vector<std::unique_ptr<Line>> lines;
	for (int i = 0; i < 20000; i++) {
		lines.emplace_back(new Line);
		check_aligned(lines.back().get(), "new Line");
		lines.back()->v[0] = static_cast<std::uint64_t>(i);
		lines.back()->v[7] = static_cast<std::uint64_t>(i) * 3;
		if (i % 3 == 0)
			lines[static_cast<size_t>(i / 2)].reset(new Line{{1, 2, 3, 4, 5, 6, 7, 8}});
	}
	for (auto &l : lines)
		sum += l->v[0] + l->v[7];

	for (int round = 0; round < 50; round++) {
		Line *arr = new Line[static_cast<size_t>(round) * 7 + 1];
		check_aligned(arr, "new Line[]");
		for (int i = 0; i <= round * 7; i++)
			arr[i].v[3] = static_cast<std::uint64_t>(i);
		sum += arr[round * 7].v[3];
		delete[] arr;
		Page *p = new Page;
		check_aligned(p, "new Page");
		p->bytes[199] = static_cast<unsigned char>(round);
		sum += p->bytes[199];
		delete p;
		Page *pa = new Page[3];
		check_aligned(pa, "new Page[]");
		delete[] pa;
	}

	std::vector<Line> vec;
	for (int i = 0; i < 50000; i++) {
		vec.push_back(Line{{static_cast<std::uint64_t>(i), 0, 0, 0, 0, 0, 0, 0}});
		if ((i & (i - 1)) == 0)
			check_aligned(vec.data(), "vector<Line>::data");
	}
	for (const auto &l : vec)
		sum += l.v[0];
	return sum;
}

std::uint64_t containers(std::uint64_t seed)
{
	std::uint64_t s = seed, sum = 0;
	std::map<std::uint64_t, std::string> m;
	std::unordered_map<std::string, std::vector<int>> u;
	std::list<std::string> l;
	for (int i = 0; i < 60000; i++) {
		std::uint64_t k = next(s) % 20000;
		switch (next(s) % 4) {
		case 0:
		case 1:
			m[k] = std::string(static_cast<size_t>(k % 97), static_cast<char>('a' + k % 26)) + std::to_string(i);
			break;
		case 2:
			m.erase(k);
			break;
		default: {
			auto &v = u["key" + std::to_string(k % 3000)];
			v.push_back(i);
			if (v.size() > 20)
				v.erase(v.begin(), v.begin() + 10);
		}
		}
		l.push_back(std::to_string(k));
		if (l.size() > 500)
			l.pop_front();
	}
	for (const auto &kv : m)
		sum += kv.first * 31 + kv.second.size() + static_cast<unsigned char>(kv.second.back());
	for (const auto &kv : u)
		sum += kv.first.size() * kv.second.size() + static_cast<std::uint64_t>(kv.second.front());
	for (const auto &x : l)
		sum += x.size();
	std::vector<std::shared_ptr<std::string>> shared;
	for (int i = 0; i < 20000; i++) {
		shared.push_back(std::make_shared<std::string>(static_cast<size_t>(i % 200), 'x'));
		if (i % 5 == 0)
			shared.erase(shared.begin() + static_cast<long>(next(s) % shared.size()));
	}
	for (const auto &p : shared)
		sum += p->size() + static_cast<std::uint64_t>(p.use_count());
	return sum + m.size() * 1000003 + u.size();
}

// Per-thread state whose destructor runs at thread exit and allocates while
// the thread (and any per-thread state of the allocator) is torn down.
struct Farewell {
	std::vector<std::string> items;
	~Farewell()
	{
		std::string last;
		for (const auto &s : items)
			last = s + last.substr(0, 10);
		items.clear();
		items.shrink_to_fit();
		std::map<int, std::string> late;
		for (int i = 0; i < 100; i++)
			late[i] = last + std::to_string(i);
	}
};
thread_local Farewell farewell;

std::uint64_t exceptions()
{
	std::uint64_t sum = 0;
	for (int i = 0; i < 5000; i++) {
		try {
			if (i % 2)
				throw std::runtime_error("failure number " + std::to_string(i) + std::string(static_cast<size_t>(i % 300), '!'));
			throw std::out_of_range(std::string(static_cast<size_t>(i % 50), '?'));
		} catch (const std::exception &e) {
			sum += std::string(e.what()).size();
		}
	}
	return sum;
}

} // namespace

int main()
{
	std::uint64_t a = aligned_new();
	std::uint64_t c = containers(42);
	std::uint64_t e = exceptions();

	std::vector<std::uint64_t> results(4);
	std::vector<std::thread> threads;
	for (unsigned t = 0; t < 4; t++)
		threads.emplace_back([t, &results] {
			for (int i = 0; i < 200; i++)
				farewell.items.push_back(std::string(static_cast<size_t>(i), static_cast<char>('a' + t)));
			results[t] = containers(1000 + t) ^ exceptions();
		});
	for (auto &t : threads)
		t.join();

	std::printf("aligned %llu\n", static_cast<unsigned long long>(a));
	std::printf("containers %llu\n", static_cast<unsigned long long>(c));
	std::printf("exceptions %llu\n", static_cast<unsigned long long>(e));
	for (unsigned t = 0; t < 4; t++)
		std::printf("thread %u %llu\n", t, static_cast<unsigned long long>(results[t]));
	if (misaligned) {
		std::printf("misaligned objects: %d\n", misaligned);
		return 1;
	}
	return 0;
}
