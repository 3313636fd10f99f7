# Guile, on Boehm GC: a thread keeps a list only it holds and waits in read(2) on a pipe (its
# port's buffer in the collected heap) while the main thread makes garbage and collects 40
# times. The collector stops the reader with a signal and scans its stack from where its handler
# finds it: a handler run on a stack of the pager's (the read trapped and waiting there) freed the
# list under the reader, a segmentation fault.
description="guile: a thread blocked reading a pipe while the main thread collects 40 times"
packages=(guile-3.0)
program="guile (threads, GC)"
cost=10
prepare() {
  cat >"$IN/threads.scm" <<'SCM'
(use-modules (ice-9 threads) (ice-9 rdelim))
(define p (pipe))
(define (make-list-of n)
  (let loop ((i 0) (acc '())) (if (= i n) acc (loop (+ i 1) (cons (* i 7) acc)))))
(define reader
  (call-with-new-thread
    (lambda ()
      (let ((mine (make-list-of 3000000)))
        (let loop ((lines 0))
          (let ((l (read-line (car p))))
            (if (eof-object? l)
                (list lines (apply + mine) (length mine))
                (loop (+ lines 1)))))))))
(define held (make-list-of 2000000))
(let loop ((round 0))
  (when (< round 40)
    (length (make-list-of 20000))
    (gc)
    (when (= 0 (modulo round 4)) (display "x\n" (cdr p)) (force-output (cdr p)))
    (usleep 2000)
    (loop (+ round 1))))
(close-port (cdr p))
(display (list (join-thread reader) (length held)))
(newline)
SCM
}
command=(guile --no-auto-compile "$IN/threads.scm")
