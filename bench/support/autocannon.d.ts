// Minimal types for the parts of autocannon the benchmarks use (the package ships none).
declare module 'autocannon' {
  interface Options {
    url: string; connections?: number; duration?: number; method?: string; headers?: Record<string, string>; body?: string; pipelining?: number;
  }
  interface Result {
    latency: { p50: number; p99: number; average: number };
    requests: { average: number; total: number };
    non2xx: number; errors: number; timeouts: number;
  }
  function autocannon(opts: Options): Promise<Result>;
  export default autocannon;
}
