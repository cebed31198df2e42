/**
 * Loaded (`--import`) into every process testkit starts. Its standard input is a pipe from the
 * test process; the kernel closes that pipe when the test process dies, however it dies (the test
 * runner kills a test file that runs past its limit), and the process then ends at once instead of
 * living on with PPID 1, holding ports, consumers and connections. SIGKILL, not a drain: nobody is
 * left to answer, and a drain could hang on logs written to a pipe nobody reads.
 */
process.stdin.on('end', () => process.kill(process.pid, 'SIGKILL'));
process.stdin.resume();
// The pipe must not keep a process alive that would otherwise exit.
(process.stdin as NodeJS.ReadStream & { unref(): void }).unref();
