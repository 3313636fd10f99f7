/*
 * rw_semaphore.pml: the protocol of uswap::rw_semaphore (include/uswap/sync/rw_semaphore.h,
 * src/sync/rw_semaphore.cc), step for step.
 *
 * State: count_ = WL (a writer owns it) | WF (the wait list is non-empty) | HO (hand-off: the
 * head of the wait list has waited too long, nobody may steal) | R (readers that own it); the
 * wait list, FIFO, changed only under wait_lock_; per waiter a `signal` word it sleeps on.
 *   down_read:  fast CAS (needs !WL && !WF); SPINS rounds of (load; stop if WF; if !WL the fast
 *               CAS); read_queued: under wait_lock_ the fast CAS again, or set WF and enqueue;
 *               then wait for the signal. A queued reader is granted the lock by the waker.
 *   up_read:    fetch_sub; if the result has WF and no readers, wake().
 *   down_write: fast CAS 0 -> WL; SPINS rounds of CAS when write_available (!WL && !HO && R==0:
 *               running writers steal even when others are queued); write_queued: under
 *               wait_lock_ take it if write_available, or set WF and enqueue (which starts its
 *               hand-off clock); then, each time it is signalled: re-take wait_lock_, take the
 *               lock if !WL && R==0 (clearing HO, and WF if it was the last waiter), else it lost
 *               to a stealer: once handoff_ns has passed it sets HO; reset the signal, wait.
 *   up_write:   fetch_and(~WL); if WF was set, wake().
 *   downgrade_write: fetch_add(reader - WL); if WF was set, wake().
 *   wake():     under wait_lock_: empty list -> clear WF; WL set (stolen) -> set HO if the head
 *               has waited handoff_ns, else nothing (the owner's up_write wakes again); head
 *               writer -> signal it if R==0 (under wait_lock_, and only if not signalled
 *               already: a signalled writer re-reads count_ anyway); head readers -> add every reader
 *               up to the next writer to R and clear HO (and WF if that empties the list),
 *               dequeue them, and signal them after dropping wait_lock_.
 *   trylocks:   the fast paths (down_write_trylock uses write_available).
 *
 * Abstractions, and why they are sound:
 *   - Each compare-exchange retry loop on count_ is one atomic step that reads count_, decides
 *     and writes, at the loop's linearisation point. Every finite behaviour of the loop is one of
 *     these (a successful CAS found count_ equal to the value it decided on; an exit without a
 *     CAS decided on a value that was current when loaded), so safety results are exact. The
 *     only behaviours dropped are infinite runs in which one thread's CAS fails forever because
 *     others keep succeeding: the liveness results assume that lock-free loops terminate.
 *   - wait_lock_ (a uswap::mutex, protecting the list and every change of WF) is a FIFO lock
 *     here. The real mutex barges (models/bit_lock.pml has the same protocol); the liveness
 *     results therefore say that the rwsem protocol starves nobody if its internal lock does not.
 *   - Time: each thread has a clock process that may expire its hand-off timer at any moment
 *     after it was queued and, under weak fairness, eventually does (time passes).
 *   - Sleeping on `signal` is a futex compare-and-block; futex_wake of a reader may arrive after
 *     the reader has left and queued again (its waiter is on the stack, so the address may be
 *     reused): that is a spurious wake-up, which the model lets happen.
 *   - Memory model: count_ is one atomic word whose read-modify-writes are totally ordered; the
 *     list is protected by wait_lock_; the signal store is a release read by an acquire load.
 *     Promela's interleavings are sequentially consistent and cover these executions.
 *
 * What scripts/check-models proves (NW writers, NR readers; threads outnumber the 2 cores):
 *   safety (ITERS=1 with 2 writers + 2 readers, and ITERS=2 with 1+2 and 2+1: each thread
 *   acquires ITERS times, blocking or trylock, and writers may downgrade):
 *     - mutual exclusion: a writer inside => nobody else inside; readers only with no writer;
 *     - invariants in every reachable state: WL => R == 0; HO => the list is non-empty and its
 *       head's clock has expired; when wait_lock_ is free, WF <=> list non-empty;
 *     - no lost wake-up: no invalid end state (nobody waits forever), and at the end count_ is 0,
 *       the list empty and wait_lock_ free.
 *   liveness (ITERS=0, threads loop forever, weak fairness), for 1 writer + 2 readers (a reader
 *   flood), 2 writers + 1 reader (stealing) and 3 writers (two alternate stealing while the
 *   third waits):
 *     - progress: no cycle in which no thread enters a critical section (pan -l -f);
 *     - no writer starvation: writer_enters = [] (wants_w0 -> <> in_w0): a writer that calls
 *       down_write gets the lock, whatever the readers and the other writers do;
 *     - no reader starvation: reader_enters = [] (wants_r0 -> <> in_r0).
 *   Four looping threads (2 + 2) are beyond an exhaustive liveness search on this machine; the
 *   three shapes cover each way a waiter can be overtaken (new readers, stealing writers, a
 *   head writer never woken because every release finds the lock stolen again).
 *   Mutants that must fail: readers ignoring WF (writer starves in the reader flood), no hand-off
 *   (writer starves to a stealer), hand-off raised only by a woken head writer, as the code was
 *   before this model (a reader starves, and with three writers a writer starves), up_read not
 *   waking, a writer clearing WF when others are still queued (lost wake-ups).
 */

#ifndef NW
#define NW 2
#endif
#ifndef NR
#define NR 2
#endif
#define N (NW + NR) /* pids 0..NW-1 are writers, NW..N-1 readers */
#ifndef SPINS
#define SPINS 1
#endif
#ifndef ITERS
#define ITERS 1 /* 0: forever */
#endif
#define NONE 255

/* count_ */
bool WL = false;
bool WF = false;
bool HO = false;
byte R = 0;

/* wait_lock_, FIFO */
byte wl_owner = NONE;
byte wlq[N];
byte wlq_len = 0;

/* the wait list */
byte q[N];
byte qlen = 0;
bool signal[N];
bool sleeping[N];

/* hand-off timers: 0 not started, 1 running, 2 expired (handoff_ns has passed) */
byte timer[N];

/* ghosts */
byte in_w = 0;
byte in_r = 0;
bool wants_w0 = false;
bool in_w0 = false;
bool wants_r0 = false;
bool in_r0 = false;
byte finished = 0;

#define is_writer(p) ((p) < NW)
#define write_available (!WL && !HO && R == 0)

inline wl_lock(me) {
  atomic {
    if
    :: wl_owner == NONE -> wl_owner = me
    :: else -> wlq[wlq_len] = me; wlq_len++
    fi
  }
  wl_owner == me
}

inline wl_unlock() {
  atomic {
    if
    :: wlq_len > 0 ->
       wl_owner = wlq[0];
       k = 0;
       do
       :: k + 1 < wlq_len -> wlq[k] = wlq[k + 1]; k++
       :: else -> break
       od;
       wlq_len--; wlq[wlq_len] = 0; k = 0
    :: else -> wl_owner = NONE
    fi
  }
}

/* appends me; its hand-off clock starts (waiter.queued_at = now) */
inline enqueue(me) {
  q[qlen] = me; qlen++; signal[me] = false; timer[me] = 1
}

/* removes the first m entries of the list */
inline dequeue(m) {
  k = 0;
  do
  :: k + m < qlen -> q[k] = q[k + m]; k++
  :: else -> break
  od;
  do
  :: k < qlen -> q[k] = 0; k++
  :: else -> break
  od;
  qlen = qlen - m; k = 0
}

/* spin on signal, then futex_wait(&signal, 0) until it is set */
inline wait_for_signal(me) {
  do
  :: signal[me] -> break
  :: atomic { !signal[me] -> sleeping[me] = true };
     !sleeping[me]
  od
}

inline futex_wake(p) {
  sleeping[p] = false
}

inline wake() {
  wl_lock(me);
  atomic {
    wk = NONE; grant = 0;
    if
    :: qlen == 0 -> WF = false
    :: qlen > 0 && WL ->                                 /* its up_write wakes again */
#if !defined(MUTANT_WRITER_ONLY_HANDOFF) && !defined(MUTANT_NO_HANDOFF)
       /* stolen from under the head: once it has waited handoff_ns, forbid stealing */
       if :: timer[q[0]] == 2 -> HO = true :: else -> skip fi
#else
       skip
#endif
    :: qlen > 0 && !WL && is_writer(q[0]) ->
       if
       :: R == 0 -> wk = q[0]                            /* woken, not granted */
       :: else -> skip                                   /* the last up_read wakes again */
       fi
    :: qlen > 0 && !WL && !is_writer(q[0]) ->
       /* grant every reader up to the next writer */
       m = 0;
       do
       :: m < qlen && !is_writer(q[m]) -> grant = grant | (1 << q[m]); timer[q[m]] = 0; m++
       :: else -> break
       od;
       R = R + m;
#ifndef MUTANT_WRITER_ONLY_HANDOFF
       HO = false;                                       /* it was theirs, if set */
#endif
       if :: m == qlen -> WF = false :: else -> skip fi;
       dequeue(m);
       m = 0
    fi
  }
  if
  :: wk != NONE ->
     /* signal the writer under wait_lock_: it stays queued until it re-takes wait_lock_;
        already signalled (not yet back under wait_lock_): it will read count_ anyway, no
        second futex_wake */
     if
     :: !signal[wk] -> signal[wk] = true; futex_wake(wk)
     :: else -> skip
     fi;
     wk = NONE;
     wl_unlock()
  :: else ->
     wl_unlock();
     m = NW;
     do
     :: m < N ->
        if
        :: grant & (1 << m) -> signal[m] = true; futex_wake(m)
        :: else -> skip
        fi;
        m++
     :: else -> break
     od;
     grant = 0; m = 0
  fi
}

inline up_read() {
  atomic {
    in_r--;
    if :: me == NW -> in_r0 = false :: else -> skip fi;
    R--;
    do_wake = WF && R == 0
  }
#ifdef MUTANT_UP_READ_NO_WAKE
  do_wake = false;
#endif
  if :: do_wake -> do_wake = false; wake() :: else -> skip fi
}

inline read_cs() {
  atomic {
    in_r++;
    if :: me == NW -> in_r0 = true; wants_r0 = false :: else -> skip fi
  }
progress_read:
  assert(in_w == 0 && !WL && R >= in_r)
}

proctype writer(byte me) {
  byte k, m, wk, grant, iter;
  bool got, do_wake;

  do
  :: ITERS == 0 || iter < ITERS ->
#if ITERS > 0
     iter++;
     if
     :: goto w_lock
     :: atomic { if :: write_available -> WL = true; got = true :: else -> skip fi };  /* trylock */
        if :: got -> goto w_acquired :: else -> goto w_next fi
     fi;
#endif
w_lock:
     if :: me == 0 -> wants_w0 = true :: else -> skip fi;
     atomic { if :: !WL && !WF && !HO && R == 0 -> WL = true; got = true :: else -> skip fi };
     if :: got -> goto w_acquired :: else -> skip fi;
     /* down_write_slow: optimistic spin, stealing when write_available */
     m = 0;
     do
     :: m < SPINS ->
        m++;
        atomic { if :: write_available -> WL = true; got = true :: else -> skip fi };
        if :: got -> goto w_acquired :: else -> skip fi
     :: else -> break
     od;
     m = 0;
     /* write_queued */
     wl_lock(me);
     atomic {
       if
       :: write_available -> WL = true; got = true
       :: else -> WF = true; enqueue(me)
       fi
     }
     if :: got -> wl_unlock(); goto w_acquired :: else -> skip fi;
w_wait:
     wl_unlock();
w_sleep:
     wait_for_signal(me);
     wl_lock(me);
     atomic {
       assert(qlen > 0 && q[0] == me);   /* only the head is ever woken */
       if
       :: !WL && R == 0 ->
          WL = true; HO = false;
#ifdef MUTANT_WRITER_ALWAYS_CLEARS_WF
          WF = false;
#else
          if :: qlen == 1 -> WF = false :: else -> skip fi;
#endif
          dequeue(1);
          got = true
       :: else -> skip
       fi
     }
     if
     :: got -> timer[me] = 0; signal[me] = false; wl_unlock(); goto w_acquired
     :: else -> skip
     fi;
     /* lost to a stealer: once it has waited handoff_ns, forbid stealing */
     atomic {
#ifndef MUTANT_NO_HANDOFF
       if :: timer[me] == 2 -> HO = true :: else -> skip fi;
#endif
#ifndef MUTANT_SIGNAL_RESET_UNLOCKED
       signal[me] = false
#else
       skip
#endif
     }
#ifdef MUTANT_SIGNAL_RESET_UNLOCKED
     /* the reset after dropping wait_lock_: a release in between finds the signal still set,
        skips its futex_wake, and the reset then erases the only wake-up */
     wl_unlock();
     signal[me] = false;
     goto w_sleep;
#endif
     goto w_wait;

w_acquired:
     atomic {
       got = false;
       in_w++;
       if :: me == 0 -> in_w0 = true; wants_w0 = false :: else -> skip fi
     }
progress_write:
     assert(in_w == 1 && in_r == 0 && WL && R == 0);
     if
     :: atomic {   /* up_write */
          in_w--;
          if :: me == 0 -> in_w0 = false :: else -> skip fi;
          WL = false; do_wake = WF
        }
        if :: do_wake -> do_wake = false; wake() :: else -> skip fi
#if ITERS > 0
     :: atomic {   /* downgrade_write, then read, then up_read */
          in_w--;
          if :: me == 0 -> in_w0 = false :: else -> skip fi;
          WL = false; R++; do_wake = WF;
          in_r++
        }
        if :: do_wake -> do_wake = false; wake() :: else -> skip fi;
        assert(in_w == 0 && !WL && R >= in_r);
        atomic { in_r--; R--; do_wake = WF && R == 0 }
        if :: do_wake -> do_wake = false; wake() :: else -> skip fi
#endif
     fi;
w_next:
     skip
  :: else -> break
  od;
  finished++
}

proctype reader(byte me) {
  byte k, m, wk, grant, iter;
  bool got, do_wake;

  do
  :: ITERS == 0 || iter < ITERS ->
#if ITERS > 0
     iter++;
     if
     :: goto r_lock
     :: atomic { if :: !WL && !WF -> R++; got = true :: else -> skip fi };   /* trylock */
        if :: got -> goto r_acquired :: else -> goto r_next fi
     fi;
#endif
r_lock:
     if :: me == NW -> wants_r0 = true :: else -> skip fi;
#ifdef MUTANT_READER_IGNORES_WF
     atomic { if :: !WL -> R++; got = true :: else -> skip fi };
#else
     atomic { if :: !WL && !WF -> R++; got = true :: else -> skip fi };
#endif
     if :: got -> goto r_acquired :: else -> skip fi;
     /* down_read_slow: optimistic spin while nobody is queued */
     m = 0;
     do
     :: m < SPINS ->
        m++;
        /* load; stop spinning if WF; if !WL, read_trylock_fast (which reloads). One step: a
         * decision on an older value is the same as this step taken when that value was current,
         * and the trylock re-reads anyway. */
        atomic {
          if
          :: WF -> m = SPINS
          :: !WF && !WL -> R++; got = true
          :: else -> skip
          fi
        }
        if :: got -> goto r_acquired :: else -> skip fi
     :: else -> break
     od;
     m = 0;
     /* read_queued */
     wl_lock(me);
     atomic {
       if
       :: !WL && !WF -> R++; got = true
       :: else -> WF = true; enqueue(me)
       fi
     }
     wl_unlock();
     if
     :: got -> skip
     :: else -> wait_for_signal(me);  /* granted by the waker */
        signal[me] = false               /* the waiter's frame is gone */
     fi;
r_acquired:
     got = false;
     read_cs();
     up_read();
r_next:
     skip
  :: else -> break
  od;
  finished++
}

/* Expires thread p's hand-off timer at some moment after it was queued (time passes). */
proctype clock(byte p) {
end:
  do
  :: atomic { timer[p] == 1 -> timer[p] = 2 }
  od
}

/* Invariants, checked in every reachable state of the safety runs: the monitor is enabled only
 * in a state that breaks one, and then fails; in every good state it is blocked, so a state where
 * every thread is stuck is still reported as an invalid end state (a lost wake-up). */
#define INV_WL (!WL || R == 0)
#define INV_HO (!HO || (qlen > 0 && timer[q[0]] == 2))   /* HO belongs to the head */
#define INV_WF (wl_owner != NONE || WF == (qlen > 0))
#if ITERS > 0
active proctype invariants() {
end:
  atomic { !(INV_WL && INV_HO && INV_WF) -> assert(INV_WL); assert(INV_HO); assert(INV_WF) }
}
#endif

init {
  byte p;
  atomic {
    p = 0;
    do
    :: p < NW -> run writer(p); run clock(p); p++
    :: p >= NW && p < N -> run reader(p); run clock(p); p++
    :: else -> break
    od
  }
#if ITERS > 0
  finished == N;
  assert(!WL && !WF && !HO && R == 0 && qlen == 0 && wl_owner == NONE);
#endif
}

ltl writer_enters { [] (wants_w0 -> <> in_w0) }
ltl reader_enters { [] (wants_r0 -> <> in_r0) }
