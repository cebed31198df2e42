/**
 * Loaded (`--import`) into every process the launcher starts. Its standard input is a pipe from the
 * process that started it (a test, a benchmark, `npm start`'s supervisor); the kernel closes that
 * pipe when that process dies, however it dies (the test runner kills a test file that runs past
 * its limit, a supervisor gets SIGKILL), and the process then ends at once instead of
 * living on with PPID 1, holding ports, consumers and connections. SIGKILL, not a drain: nobody is
 * left to answer, and a drain could hang on logs written to a pipe nobody reads.
 */
process.stdin.on('end', () => process.kill(process.pid, 'SIGKILL'));
process.stdin.resume();
// The pipe must not keep a process alive that would otherwise exit.
(process.stdin as NodeJS.ReadStream & { unref(): void }).unref();
