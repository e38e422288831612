// SPDX-License-Identifier: MIT
#pragma once
// Whether this test binary runs under a sanitizer (the asan preset; the fuzz preset's clang).
// There every memory access is checked, which changes what a test can do (an address-space limit
// is defeated by the sanitizer's own reservations) or afford (a whole model on the device path).

namespace fastmlip::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace fastmlip::test
