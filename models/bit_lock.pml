/*
 * bit_lock.pml: the protocol of uswap::bit_lock (include/uswap/sync/bit_lock.h).
 *
 * What is modelled, step for step with the C++:
 *   - the lock bits H (held) and W (waiters) and one caller data bit D, all in the 32-bit half of
 *     the word the futex parks on (so a holder changing D makes a parked thread's compare fail,
 *     as bit_lock<0,1> does in the tests);
 *   - lock(): fast path load + CAS(v, v|H); slow path SPINS rounds of (load; if W break; if !H
 *     CAS(v, v|H)); then the parking loop: old = fetch_or(H|W); if !(old & H) the lock is ours
 *     (taken with W set: a thread that has parked cannot know whether others still sleep); else
 *     futex_wait(half, old|H|W) and round again;
 *   - try_lock(): load; while !H: CAS(v, v|H);
 *   - while held: update() (load + CAS loop on D), set_bits()/clear_bits() (fetch_or/fetch_and
 *     on D); none of them may change H or W;
 *   - unlock(): fetch_and(~(H|W)), futex_wake(1) if W was set; unlock_with(): exchange with a new
 *     data value, same wake;
 *   - futex_wait(addr, v): compare-and-block, atomically (the kernel compares under the hash
 *     bucket lock); futex_wake(1) wakes the sleeper that has slept longest (the kernel's bucket
 *     list is FIFO for SCHED_OTHER threads). Spurious returns from futex_wait (signals, EINTR)
 *     are modelled in the safety run (SPURIOUS).
 * Every compare_exchange is a separate load and an atomic compare-and-swap, as in the code, and
 * fetch_or / fetch_and / exchange are single atomic steps, as in C++;
 * a failed CAS refreshes v with the current word, as compare_exchange does. Spurious failure of
 * compare_exchange_weak is not modelled: it is a retry with v unchanged, which the model already
 * covers as "another thread changed the word and changed it back".
 *
 * Memory model: all lock state is in one atomic word, so per-location coherence orders every
 * access to it; a relaxed load that returns an older value is the same as an earlier load in an
 * interleaving, and every decision taken on such a value is re-validated by a CAS or by the
 * kernel's compare. Sequentially consistent interleavings (Promela's) therefore cover the C++
 * executions of the protocol. The data protected by the lock is ordered by acquire on the
 * successful CAS and release on unlock's read-modify-write (not a property checked here).
 *
 * What `scripts/check-models` proves with it (NPROC threads, default 3, more than the 2 cores):
 *   safety (ITERS=2, every thread locks twice, lock or try_lock chosen freely; run with SPURIOUS,
 *   where the invariants must hold despite spurious returns, and without, where a lost wake-up
 *   shows directly as a thread asleep forever):
 *     - mutual exclusion: at most one thread in the critical section, and H set while it is;
 *     - invariants in every reachable state: W => H; no lost wake-up, i.e. a thread asleep in
 *       futex_wait implies W is set, or an awake thread is in the parking loop (it will set W or
 *       take the lock with W), or an unlock is between clearing W and its futex_wake;
 *     - no invalid end state (no thread asleep forever, no deadlock) and, once every thread has
 *       finished, the word has H and W clear and D is what the last holder left.
 *   liveness (ITERS=0, threads loop forever, no spurious wake-ups, weak fairness):
 *     - progress: no cycle without a thread entering the critical section (pan -l -f);
 *     - no forgotten sleeper: [] (asleep0 -> <> !asleep0): a parked thread is always woken.
 *       This is what changed the code: the parking loop used to be "if !H CAS(v, v|H|W); else
 *       if !W CAS(v, v|W); futex_wait", and spin found a fair cycle in which a woken waiter's
 *       CAS keeps failing against a barger, W stays clear, and the other sleeper is never woken
 *       (kept as MUTANT_CAS_PARK_LOOP, which must fail).
 *   Not proved, and false by design: that every thread eventually gets the lock. A woken thread
 *   may lose the lock to a fresh thread's fast-path CAS (barging) again and again; the kernel's
 *   bit_spin_lock is unfair in the same way. check-models verifies that spin does find this
 *   starvation (property `no_starvation` must FAIL), which also shows that the liveness checks
 *   are not vacuous. Mutants (-DMUTANT_...) must fail too: see scripts/check-models.
 */

#ifndef NPROC
#define NPROC 3
#endif
#ifndef SPINS
#define SPINS 1
#endif
#ifndef ITERS
#define ITERS 2 /* 0: forever */
#endif

#define DB 1 /* a data bit */
#define WB 2 /* waiters */
#define HB 4 /* held */
#define LOCKB (HB | WB)

byte word = 0;          /* the 32-bit half: H, W, D */
byte in_cs = 0;         /* threads in the critical section */
byte fq[NPROC];         /* futex wait queue, FIFO */
byte fqlen = 0;
bool asleep[NPROC];
byte parking = 0;       /* threads in the parking loop that are not asleep */
byte waking = 0;        /* unlocks between clearing W and their futex_wake */
byte last_data = 0;     /* D as the last holder left it */
bool in_cs0 = false;    /* thread 0 in its critical section (for LTL) */
bool wants0 = false;    /* thread 0 called lock() and has not got it yet */
byte finished = 0;      /* threads that have returned */

/* compare_exchange: on failure v receives the current value. */
inline cas(v, n, ok) {
  atomic {
    if
    :: word == (v) -> word = (n); ok = true
    :: else -> v = word; ok = false
    fi
  }
}

/* futex_wait(half, v): sleep only if the half still equals v, atomically. */
inline futex_wait(me, v) {
  atomic {
    if
#ifdef MUTANT_WAIT_NO_COMPARE
    :: true ->
#else
    :: word == (v) ->
#endif
       fq[fqlen] = me; fqlen++; asleep[me] = true; parking--
    :: else -> skip
    fi
  }
  /* asleep until a futex_wake (or, in the safety run, a spurious return) */
  if
  :: !asleep[me]
#ifdef SPURIOUS
  :: atomic {
       asleep[me] ->
       /* leave the queue wherever we are in it */
       j = 0;
       do
       :: j < fqlen && fq[j] != me -> j++
       :: else -> break
       od;
       assert(j < fqlen);
       do
       :: j + 1 < fqlen -> fq[j] = fq[j + 1]; j++
       :: else -> break
       od;
       fqlen--; fq[fqlen] = 0; asleep[me] = false; parking++
     }
#endif
  fi
}

/* futex_wake(half, 1), after an unlock that saw W. */
inline futex_wake_one() {
  atomic {
    if
    :: fqlen > 0 ->
       asleep[fq[0]] = false; parking++;
       j = 0;
       do
       :: j + 1 < fqlen -> fq[j] = fq[j + 1]; j++
       :: else -> break
       od;
       fqlen--; fq[fqlen] = 0
    :: else -> skip
    fi;
    waking--
  }
}

proctype thread(byte me) {
  byte v, old, n, i, j;
  bool ok;
  byte iter = 0;

  do
  :: ITERS == 0 || iter < ITERS ->
#if ITERS > 0
     iter++;
#endif
#if ITERS > 0
     if
     :: true -> goto lock_fast
     :: true -> goto try_lock
     fi;
#else
     goto lock_fast;   /* liveness: try_lock never waits, so it is left out */
#endif

try_lock:
     v = word;
     do
     :: !(v & HB) -> cas(v, v | HB, ok); if :: ok -> goto acquired :: else -> skip fi
     :: else -> goto next   /* held: try_lock fails, no critical section */
     od;

lock_fast:
     if :: me == 0 -> wants0 = true :: else -> skip fi;
     v = word;
     if
     :: !(v & HB) -> cas(v, v | HB, ok); if :: ok -> goto acquired :: else -> skip fi
     :: else -> skip
     fi;
     /* lock_slow, phase 1: bounded test-and-test-and-set */
     i = 0;
     do
     :: i < SPINS ->
        i++;
        v = word;
        if
        :: v & WB -> break   /* sleepers exist: queue behind them */
        :: !(v & HB) -> cas(v, v | HB, ok); if :: ok -> goto acquired :: else -> skip fi
        :: else -> skip
        fi
     :: else -> break
     od;
     /* phase 2: set H and W in one fetch_or. Finding H clear takes the lock, with W set (others
      * may still sleep); finding H set has announced us, and we sleep while the half is unchanged. */
     parking++;
#ifdef MUTANT_CAS_PARK_LOOP
     /* The parking loop as it was before the model was written: separate CASes to take the lock
      * and to set W. Safe, but a waiter whose CAS keeps failing (a barger changes the word between
      * its load and its CAS, forever) never sets W again, and then nobody wakes the sleepers:
      * no_forgotten_sleeper fails under weak fairness. Kept as a mutant to show why it changed. */
     v = word;
park:
     if
     :: !(v & HB) ->
        cas(v, v | LOCKB, ok);
        if :: ok -> parking--; goto acquired :: else -> goto park fi
     :: else -> skip
     fi;
     if
     :: !(v & WB) ->
        cas(v, v | WB, ok);
        if :: ok -> v = v | WB :: else -> goto park fi
     :: else -> skip
     fi;
     futex_wait(me, v);
     v = word;
     goto park;
#else
park:
     atomic {
       old = word;
#ifdef MUTANT_REACQUIRE_WITHOUT_W
       if :: old & HB -> word = word | LOCKB :: else -> word = word | HB fi
#else
       word = word | LOCKB
#endif
     }
     if
     :: !(old & HB) -> parking--; goto acquired
     :: else -> futex_wait(me, (old | LOCKB)); goto park
     fi;
#endif

acquired:
     atomic {
       in_cs++;
       if :: me == 0 -> in_cs0 = true; wants0 = false :: else -> skip fi
     }
progress_cs:
     assert(in_cs == 1 && (word & HB));
     /* the holder changes the data bit, or not (liveness runs leave D alone: a change of D only
      * makes a futex_wait in progress return at once, it cannot put a thread to sleep) */
#if ITERS > 0
     if
     :: skip
     :: v = word;   /* update(): CAS loop on the data bits */
#ifdef MUTANT_PLAIN_UPDATE
        word = v ^ DB   /* a plain store of the whole word: may overwrite a waiter's W */
#else
        do
        :: cas(v, v ^ DB, ok); if :: ok -> break :: else -> skip fi
        od
#endif
     :: atomic { word = word | DB }          /* set_bits (clear_bits is the same step) */
     fi;
#endif
     assert(word & HB);
     atomic {
       v = 0; i = 0; ok = false;
       in_cs--;
#if ITERS > 0
       last_data = word & DB;
#endif
       if :: me == 0 -> in_cs0 = false :: else -> skip fi
     }
     /* unlock() or unlock_with(data) */
     if
     :: atomic {
          old = word;
#ifdef MUTANT_UNLOCK_KEEPS_WAITERS
          word = word & ~HB;
#else
          word = word & ~LOCKB;
#endif
          if :: old & WB -> waking++ :: else -> skip fi
        }
#if ITERS > 0
     :: atomic {
          old = word;
          if :: n = 0 :: n = DB fi;
          word = n; last_data = n;
          if :: old & WB -> waking++ :: else -> skip fi
        }
#endif
     fi;
#ifndef MUTANT_NO_WAKE
     if :: old & WB -> futex_wake_one() :: else -> skip fi;
#else
     if :: old & WB -> atomic { waking-- } :: else -> skip fi;
#endif
next:
     /* dead locals back to 0, so that states differing only in them are merged */
     atomic { v = 0; old = 0; n = 0; i = 0; j = 0; ok = false }
  :: else -> break
  od;
  finished++
}

/* Invariants, checked in every reachable state of the safety run: the monitor is enabled only in
 * a state that breaks one, and then fails. Guarding it this way (rather than looping on an
 * assertion) keeps it blocked in every good state, so a state where every thread is stuck is
 * still a deadlock that pan reports as an invalid end state. */
#define W_IMPLIES_H (!(word & WB) || (word & HB))
#define NO_LOST_WAKEUP (fqlen == 0 || (word & WB) || parking > 0 || waking > 0)
#if ITERS > 0 && !defined(NO_MONITOR)
active proctype invariants() {
end:
  atomic { !(W_IMPLIES_H && NO_LOST_WAKEUP) -> assert(W_IMPLIES_H); assert(NO_LOST_WAKEUP) }
}
#endif

init {
  byte p;
  atomic {
    p = 0;
    do
    :: p < NPROC -> run thread(p); p++
    :: else -> break
    od
  }
#if ITERS > 0
  /* every thread has finished: the lock is free, nobody sleeps, the data bit is intact */
  finished == NPROC;
  assert(fqlen == 0 && parking == 0 && waking == 0);
  assert((word & LOCKB) == 0);
  assert((word & DB) == last_data);
#endif
}

ltl no_forgotten_sleeper { [] (asleep[0] -> <> !asleep[0]) }
ltl no_starvation { [] (wants0 -> <> in_cs0) }
