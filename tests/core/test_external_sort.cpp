#include "core/external_sort.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <random>
#include <stdexcept>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

using payrecon::ExternalSort;

namespace {

using Records = std::vector<std::pair<std::string, std::string>>;

// Keys as sorting makes them hard: shared prefixes around the 8- and 16-byte prefix boundaries,
// bytes above 0x7f and NUL, the empty key, duplicates (for stability), lengths 0..40.
Records random_records(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    const std::vector<std::string> stems = {
        "", "pr_", "pr_0123456789ab", "pr_0123456789abc", "\xff\xfe", std::string("a\0b", 3)};
    std::uniform_int_distribution<int> stem(0, static_cast<int>(stems.size()) - 1);
    std::uniform_int_distribution<int> len(0, 24);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_int_distribution<int> small(0, 3);
    Records out;
    for (std::size_t i = 0; i < n; ++i) {
        std::string key = stems[static_cast<std::size_t>(stem(rng))];
        const int extra = small(rng) == 0 ? small(rng) : len(rng); // short keys repeat often
        for (int j = 0; j < extra; ++j) {
            key += static_cast<char>(small(rng) == 0 ? byte(rng) : '0' + small(rng));
        }
        out.emplace_back(std::move(key),
                         "#" + std::to_string(i)); // the payload says where it came in
    }
    return out;
}

Records sorted(Records records) {
    std::stable_sort(records.begin(), records.end(), [](const auto& a, const auto& b) {
        return a.first < b.first;
    }); // std::string: byte order
    return records;
}

Records run_sort(ExternalSort& sort, const Records& input) {
    for (const auto& [k, p] : input) {
        sort.add(k, p);
    }
    sort.finish();
    Records out;
    while (sort.next()) {
        out.emplace_back(std::string(sort.key()), std::string(sort.payload()));
    }
    CHECK_FALSE(sort.next()); // stays at the end
    return out;
}

std::string scratch_dir() {
    char path[] = "/tmp/payrecon-sort-test-XXXXXX";
    REQUIRE(::mkdtemp(path) != nullptr);
    return path;
}

std::size_t files_in(const std::string& dir) {
    std::size_t n = 0;
    DIR* d = ::opendir(dir.c_str());
    REQUIRE(d != nullptr);
    while (const dirent* e = ::readdir(d)) {
        n += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
    }
    ::closedir(d);
    return n;
}

} // namespace

TEST_CASE(
    "external sort: records that fit memory come out in byte order, equal keys in input order",
    "[core][sort]") {
    const Records input = random_records(20000, 1);
    ExternalSort sort({std::size_t{16} << 20, "", "test records"});
    const Records out = run_sort(sort, input);
    CHECK(sort.runs_written() == 0);
    CHECK(sort.bytes_written() == 0);
    CHECK(sort.records() == input.size());
    CHECK(out == sorted(input));
}

TEST_CASE("external sort: a small memory spills sorted runs and merges them to the same order",
          "[core][sort]") {
    const std::string dir = scratch_dir();
    for (const unsigned seed : {2u, 3u, 4u}) {
        const Records input = random_records(30000, seed);
        ExternalSort sort({8192, dir, "test records"});
        const Records out = run_sort(sort, input);
        CHECK(sort.runs_written() > 50);
        CHECK(sort.bytes_written() > 0);
        CHECK(out == sorted(input));
        // The runs' file was unlinked when it was created: nothing in the directory, even now.
        CHECK(files_in(dir) == 0);
    }
    ::rmdir(dir.c_str());
}

TEST_CASE("external sort: runs of more than 65,536 records, distributed by 16 bits of their key "
          "and then sorted bucket by bucket, come out as a stable sort",
          "[core][sort]") {
    // 16 MiB: up to 174,762 entries a run, so that each run takes the bucket pass.
    const std::string dir = scratch_dir();
    Records operation_ids; // as payrecon's: "pr_" and hex, equal in their first 3 bytes
    std::mt19937 rng(7);
    for (int i = 0; i < 400000; ++i) {
        char hex[33];
        std::snprintf(hex, sizeof hex, "%08x%08x%08x%08x", static_cast<unsigned>(rng()),
                      static_cast<unsigned>(rng()), static_cast<unsigned>(rng() % 64),
                      static_cast<unsigned>(i % 7));
        operation_ids.emplace_back("pr_" + std::string(hex, i % 5 == 0 ? 9 : 32),
                                   std::to_string(i));
    }
    for (const Records& input : {random_records(400000, 5), operation_ids}) {
        ExternalSort sort({std::size_t{16} << 20, dir, "many records"});
        const Records out = run_sort(sort, input);
        CHECK(sort.runs_written() >= 1);
        CHECK(out == sorted(input));
    }
    ::rmdir(dir.c_str());
}

TEST_CASE("external sort: input already in order, with runs, stays stable", "[core][sort]") {
    Records input;
    for (int i = 0; i < 5000; ++i) {
        const std::string key = "pr_" + std::to_string(100000 + i / 3); // every key three times
        input.emplace_back(key, std::to_string(i));
    }
    for (const std::size_t memory : {std::size_t{4096}, std::size_t{1} << 20}) {
        ExternalSort sort({memory, "", "presorted records"});
        CHECK(run_sort(sort, input) == input);
    }
}

TEST_CASE("external sort: runs each in order that overlap are merged, not put one after the other",
          "[core][sort]") {
    // Ascending sequences of L keys, each starting below where the one before ended. For some L a
    // run holds whole sequences exactly, so that every run is in order and only the runs' order is
    // wrong; whatever a run holds, the output is the input sorted.
    for (int length = 1; length <= 80; ++length) {
        Records input;
        for (int sequence = 0; sequence < 6; ++sequence) {
            for (int i = 0; i < length; ++i) {
                const int n = i * 6 + (5 - sequence); // each sequence ascends; sequences descend
                input.emplace_back("k" + std::string(5 - std::to_string(n).size(), '0') +
                                       std::to_string(n),
                                   std::to_string(sequence));
            }
        }
        ExternalSort sort({4096, "", "overlapping runs"});
        INFO("sequences of " << length);
        CHECK(run_sort(sort, input) == sorted(input));
    }
}

TEST_CASE("external sort: nothing in, nothing out", "[core][sort]") {
    ExternalSort sort({4096, "", "nothing"});
    sort.finish();
    CHECK_FALSE(sort.next());
    CHECK(sort.records() == 0);
}

TEST_CASE("external sort: misuse and a record larger than its memory are refused", "[core][sort]") {
    CHECK_THROWS_AS(ExternalSort({1000, "", "x"}), std::invalid_argument);
    ExternalSort sort({4096, "", "big records"});
    CHECK_THROWS_WITH(sort.add("k", std::string(5000, 'x')),
                      Catch::Contains("big records") &&
                          Catch::Contains("does not fit the sort buffer"));
    CHECK_THROWS_AS(sort.next(), std::logic_error);
    sort.add("k", "fits");
    sort.finish();
    CHECK_THROWS_AS(sort.add("k2", ""), std::logic_error);
    REQUIRE(sort.next());
    CHECK(sort.payload() == "fits");
}

TEST_CASE("external sort: a temporary directory that cannot be written says where and what to do",
          "[core][sort]") {
    const Records input = random_records(2000, 5);
    ExternalSort sort({4096, "/nonexistent/payrecon-sort", "our payments of stripe"});
    try {
        run_sort(sort, input);
        FAIL("the sort spilled into a directory that does not exist");
    } catch (const std::runtime_error& e) {
        const std::string message = e.what();
        CHECK_THAT(message, Catch::Contains("our payments of stripe") &&
                                Catch::Contains("/nonexistent/payrecon-sort") &&
                                Catch::Contains("No such file or directory") &&
                                Catch::Contains("TMPDIR"));
    }
}

TEST_CASE("external sort: a file system that fills up mid-run is an error, not a short result",
          "[core][sort]") {
    // A child whose files may not grow past 64 KiB: the write of a run fails with EFBIG, as it
    // would with ENOSPC on a full disk.
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::signal(SIGXFSZ, SIG_IGN);
        rlimit limit{64 * 1024, 64 * 1024};
        ::setrlimit(RLIMIT_FSIZE, &limit);
        try {
            ExternalSort sort({std::size_t{1} << 15, "", "records"});
            for (const auto& [k, p] : random_records(20000, 6)) {
                sort.add(k, p);
            }
            sort.finish();
            while (sort.next()) {
            }
            ::_exit(1); // no error: wrong
        } catch (const std::runtime_error& e) {
            ::_exit(std::string(e.what()).find("writing a sorted run") != std::string::npos &&
                            std::string(e.what()).find("File too large") != std::string::npos
                        ? 0
                        : 2);
        } catch (...) {
            ::_exit(3);
        }
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}
