// Sizes in bytes, read and written the same way by every command. One meaning for each unit:
// K, M, G, T and KiB, MiB, GiB, TiB are powers of 1024; KB, MB, GB, TB are powers of 1000 (as in the SI and the
// IEC's binary prefixes). Units are case-insensitive.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dualpipe {

// What byte units mean, for help texts and error messages.
inline constexpr const char* kByteUnitsHelp =
    "B, K/KiB, M/MiB, G/GiB, T/TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000)";

// "1.5 GiB", "512 MiB", "42 KiB", "17 bytes": a byte count for messages.
std::string describe_bytes(double bytes);

// The bytes a unit stands for ("GiB": 2^30, "GB": 10^9, "" or "B": 1); nullopt for anything else.
std::optional<double> byte_unit_factor(const std::string& unit);

// Parses a size such as 4G, 24GiB, 512MB or 3e9 (bytes without a unit). Throws InvalidArgument naming `what`
// (the option) and the text when it is not a positive size of at most 9e18 bytes.
std::int64_t parse_byte_size(const std::string& text, const std::string& what);

}  // namespace dualpipe
