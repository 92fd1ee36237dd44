// TSan builds only (BLK_SANITIZE=thread): Debian's absl is not built with TSan, so the lock and
// unlock inside libabsl_synchronization are invisible to it and every access guarded by an
// absl::Mutex would be reported as a race. These definitions interpose absl's own (the
// executable is searched before the library), call the real function found with
// dlsym(RTLD_NEXT) and tell TSan about the acquire and release, as an instrumented absl would.
// Accesses made inside absl (conditions evaluated for other waiters) fall between a pre and a
// post annotation, where TSan ignores them.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace {

#define BLK_STRINGIFY_INNER(x) #x
#define BLK_STRINGIFY(x) BLK_STRINGIFY_INNER(x)

// The real absl function, by its mangled name without the "_ZN4absl<len><inline ns>" prefix.
template <typename Fn>
Fn Real(const char* suffix) {
  const char* ns = BLK_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  std::string name = "_ZN4absl" + std::to_string(std::strlen(ns)) + ns + suffix;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: %s not found\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

using MutexFn = void (*)(absl::Mutex*);
using TryFn = bool (*)(absl::Mutex*);
using CondFn = void (*)(absl::Mutex*, const absl::Condition&);
using CondTimeoutFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Duration);
using CondDeadlineFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Time);
using WaitFn = void (*)(absl::CondVar*, absl::Mutex*);
using WaitTimeoutFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Duration);
using WaitDeadlineFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Time);

// absl calls some of these from others (AwaitWithTimeout calls AwaitWithDeadline through the
// PLT, so it reaches the definition below): only the outermost call is annotated.
thread_local int depth = 0;

// Runs `wait`, which releases `mu` and holds it again when it returns, as an unlock followed by
// a lock (what TSan must see for Await and CondVar waits).
template <typename Wait>
auto ReleasedDuring(absl::Mutex* mu, unsigned flags, Wait wait) {
  if (depth > 0) {
    return wait();
  }
  __tsan_mutex_pre_unlock(mu, flags);
  ++depth;
  auto result = wait();
  --depth;
  __tsan_mutex_post_unlock(mu, flags);
  __tsan_mutex_pre_lock(mu, flags);
  __tsan_mutex_post_lock(mu, flags, 0);
  return result;
}

// Runs `lock`, which returns holding `mu`, as a lock.
template <typename Lock>
auto Acquired(absl::Mutex* mu, unsigned flags, Lock lock) {
  if (depth > 0) {
    return lock();
  }
  __tsan_mutex_pre_lock(mu, flags);
  ++depth;
  auto result = lock();
  --depth;
  __tsan_mutex_post_lock(mu, flags, 0);
  return result;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static const auto real = Real<MutexFn>("5Mutex4LockEv");
  Acquired(this, 0, [&] { return (real(this), 0); });
}

void Mutex::ReaderLock() {
  static const auto real = Real<MutexFn>("5Mutex10ReaderLockEv");
  Acquired(this, __tsan_mutex_read_lock, [&] { return (real(this), 0); });
}

bool Mutex::TryLock() {
  static const auto real = Real<TryFn>("5Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  bool locked = real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
                         0);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real = Real<TryFn>("5Mutex13ReaderTryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_read_lock);
  bool locked = real(this);
  __tsan_mutex_post_lock(
      this, __tsan_mutex_try_read_lock | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Mutex::Unlock() {
  static const auto real = Real<MutexFn>("5Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<MutexFn>("5Mutex12ReaderUnlockEv");
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

void Mutex::LockWhen(const Condition& cond) {
  static const auto real = Real<CondFn>("5Mutex8LockWhenERKNS0_9ConditionE");
  Acquired(this, 0, [&] { return (real(this, cond), 0); });
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real = Real<CondFn>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Acquired(this, __tsan_mutex_read_lock, [&] { return (real(this, cond), 0); });
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static const auto real =
      Real<CondTimeoutFn>("5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Acquired(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real =
      Real<CondDeadlineFn>("5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Acquired(this, 0, [&] { return real(this, cond, deadline); });
}

void Mutex::Await(const Condition& cond) {
  static const auto real = Real<CondFn>("5Mutex5AwaitERKNS0_9ConditionE");
  ReleasedDuring(this, 0, [&] { return (real(this, cond), 0); });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static const auto real =
      Real<CondTimeoutFn>("5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return ReleasedDuring(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real =
      Real<CondDeadlineFn>("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return ReleasedDuring(this, 0, [&] { return real(this, cond, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  static const auto real = Real<WaitFn>("7CondVar4WaitEPNS0_5MutexE");
  ReleasedDuring(mu, 0, [&] { return (real(this, mu), 0); });
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  static const auto real =
      Real<WaitTimeoutFn>("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return ReleasedDuring(mu, 0, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static const auto real =
      Real<WaitDeadlineFn>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return ReleasedDuring(mu, 0, [&] { return real(this, mu, deadline); });
}

ABSL_NAMESPACE_END
}  // namespace absl
