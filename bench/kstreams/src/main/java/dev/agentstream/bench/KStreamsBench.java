package dev.agentstream.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams side of {@code make bench}: the word count of apps/wordcount.py and the pass-through of
 * bench/apps/passthrough.py, one stream thread, at-least-once, measured the way bench/common.py's Meter measures the
 * Python sides and reported on stdout with the same BENCH_EVENT / BENCH_RESULT lines.
 *
 * <pre>
 *   KStreamsBench wordcount   --app-id A --in sentences --out C --sentences N --words-total M --state-dir D
 *   KStreamsBench passthrough --app-id A --in T --out T2 --expect N --state-dir D
 * </pre>
 *
 * The bootstrap comes from BENCH_BOOTSTRAP, the broker's pid(s) from BENCH_BROKER_PID (comma-separated), the
 * replication factor of Kafka Streams' internal topics from BENCH_REPLICATION_FACTOR (default 1).
 */
public final class KStreamsBench {
    static final String STORE = "word-counts-store";
    /** The split of apps/wordcount.py: Python's {@code re.compile(r"\W+")} on str is Unicode-aware. */
    static final Pattern WORD = Pattern.compile("\\W+", Pattern.UNICODE_CHARACTER_CLASS);

    private KStreamsBench() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parse(argv);
        String mode = args.get("mode");
        String bootstrap = System.getenv("BENCH_BOOTSTRAP");
        if (bootstrap == null || bootstrap.isEmpty()) {
            throw new IllegalArgumentException("BENCH_BOOTSTRAP is not set");
        }
        Progress.broker = brokerPids(System.getenv("BENCH_BROKER_PID"));
        Topology topology;
        if ("wordcount".equals(mode)) {
            Progress.expectSentences = Long.parseLong(require(args, "sentences"));
            Progress.expectWords = Long.parseLong(require(args, "words-total"));
            topology = wordCount(require(args, "in"), require(args, "out"));
        } else if ("passthrough".equals(mode)) {
            Progress.expectSentences = Long.parseLong(require(args, "expect"));
            Progress.expectWords = 0;
            topology = passThrough(require(args, "in"), require(args, "out"));
        } else {
            throw new IllegalArgumentException("mode must be wordcount or passthrough, got " + mode);
        }
        Properties props = config(args, bootstrap);
        KafkaStreams streams = new KafkaStreams(topology, props);
        Throwable[] failed = new Throwable[1];
        streams.setUncaughtExceptionHandler(exc -> {
            failed[0] = exc;
            Progress.done.countDown();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                .SHUTDOWN_CLIENT;
        });
        announce("started", "");
        streams.start();
        long timeoutS = Long.parseLong(args.getOrDefault("timeout", "900"));
        boolean finished = Progress.done.await(timeoutS, TimeUnit.SECONDS);
        String result = finished && failed[0] == null ? Progress.result(mode) : null;
        streams.close(Duration.ofSeconds(30));
        if (failed[0] != null) {
            System.err.println("Kafka Streams failed: " + failed[0]);
            failed[0].printStackTrace();
            System.exit(2);
        }
        if (result == null) {
            System.err.println("not done within " + timeoutS + " s: handled " + Progress.handled + " of "
                + Progress.expectSentences + ", words " + Progress.words + " of " + Progress.expectWords);
            System.exit(3);
        }
        System.out.println("BENCH_RESULT " + result);
        System.out.flush();
        System.exit(0);
    }

    /** sentences -> split (lower-cased, \W+) -> repartition by word -> count in a cached RocksDB store -> counts. */
    static Topology wordCount(String in, String out) {
        StreamsBuilder builder = new StreamsBuilder();
        // persistent RocksDB, changelog on (the default), the record cache in front of it: table writes reach
        // RocksDB and the changelog at each commit (or when the cache is full), like agentstream's table cache
        builder.addStateStore(
            Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore(STORE), Serdes.String(), Serdes.Long())
                .withCachingEnabled());
        ObjectMapper json = new ObjectMapper();
        builder.stream(in, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
            .flatMap((key, value) -> {
                List<KeyValue<String, String>> words = new ArrayList<>();
                for (String word : WORD.split(text(json, value).toLowerCase(Locale.ROOT))) {
                    if (!word.isEmpty()) {
                        words.add(KeyValue.pair(word, word));
                    }
                }
                Progress.handled++;
                return words;
            })
            .repartition(Repartitioned.with(Serdes.String(), Serdes.String()).withName("words"))
            .process(Count::new, STORE)
            .to(out, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    static String text(ObjectMapper json, byte[] value) {
        try {
            JsonNode node = json.readTree(value);
            JsonNode text = node == null ? null : node.get("text");
            return text == null || text.isNull() ? "" : text.isTextual() ? text.textValue() : text.toString();
        } catch (IOException exc) {
            return "";  // not JSON: no words (the Python sides would log and skip it)
        }
    }

    /** Every word's new count, forwarded at once (the output topic gets every update, like the other sides). */
    static final class Count implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> context;
        private KeyValueStore<String, Long> store;

        @Override
        public void init(ProcessorContext<String, String> context) {
            this.context = context;
            this.store = context.getStateStore(STORE);
        }

        @Override
        public void process(Record<String, String> record) {
            Long old = store.get(record.key());
            long count = (old == null ? 0L : old) + 1L;
            store.put(record.key(), count);
            context.forward(record.withValue(Long.toString(count)));  // JSON integer, as orjson.dumps(count)
            Progress.words++;
            if (Progress.finished()) {
                context.commit();  // the Python sides flush and commit as soon as the input is handled
            }
        }
    }

    /** Each record copied unchanged (key and value bytes). */
    static Topology passThrough(String in, String out) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(in, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
            .process(Copy::new)
            .to(out, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        return builder.build();
    }

    static final class Copy implements Processor<byte[], byte[], byte[], byte[]> {
        private ProcessorContext<byte[], byte[]> context;

        @Override
        public void init(ProcessorContext<byte[], byte[]> context) {
            this.context = context;
        }

        @Override
        public void process(Record<byte[], byte[]> record) {
            context.forward(record);
            Progress.handled++;
            if (Progress.finished()) {
                context.commit();
            }
        }
    }

    static Properties config(Map<String, String> args, String bootstrap) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, require(args, "app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.STATE_DIR_CONFIG, require(args, "state-dir"));
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 1000);  // agentstream's commit_interval (1 s)
        // Kafka Streams' default record cache (10 MB for the whole client), stated so the figures say what ran
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, Long.parseLong(args.getOrDefault("cache-bytes",
            String.valueOf(10L * 1024 * 1024))));
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG,
            Integer.parseInt(System.getenv().getOrDefault("BENCH_REPLICATION_FACTOR", "1")));
        // the same group timings and poll size as the other sides (bench/common.py)
        p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.MAX_POLL_RECORDS_CONFIG), 1000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.INTERCEPTOR_CLASSES_CONFIG), Progress.class.getName());
        // the linger every side has (aiokafka linger_ms=5, agentstream producer_linger); acks=all
        p.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), 5);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.ACKS_CONFIG), "all");
        return p;
    }

    // -- the measured interval -------------------------------------------------------------------------------

    /**
     * Watches the main consumer: the first poll that returns records starts the interval (as Meter.start() on
     * the first fetched batch); the first commit after every input record was handled ends it. With
     * at-least-once, Kafka Streams flushes the producer (every output acknowledged) before it commits the
     * offsets with commitSync, whose success calls onCommit; one stream thread does both, so that commit covers
     * every record handled before it.
     */
    public static final class Progress
            implements org.apache.kafka.clients.consumer.ConsumerInterceptor<byte[], byte[]> {
        static long expectSentences;
        static long expectWords;
        static long handled;  // sentences (word count) or records (pass-through), on the stream thread
        static long words;
        static long[] broker = new long[0];
        static final CountDownLatch done = new CountDownLatch(1);
        static volatile boolean started;
        static double t0;
        static double cpu0;
        static Double brokerCpu0;
        static double tEnd;
        static double tHandled;
        static double jit0;
        static double jitEnd;
        static double gc0;
        static double gcEnd;  // the last input record handled (before the final flush and commit)
        static double cpuEnd;
        static Double brokerCpuEnd;

        static boolean finished() {
            boolean finished = handled >= expectSentences && words >= expectWords;
            if (finished && tHandled == 0) {
                tHandled = monotonic();
            }
            return finished;
        }

        @Override
        public org.apache.kafka.clients.consumer.ConsumerRecords<byte[], byte[]> onConsume(
                org.apache.kafka.clients.consumer.ConsumerRecords<byte[], byte[]> records) {
            if (!started && !records.isEmpty()) {
                started = true;
                t0 = monotonic();
                cpu0 = cpuSeconds();
                jit0 = jitSeconds();
                gc0 = gcSeconds();
                brokerCpu0 = brokerCpuSeconds(broker);
            }
            return records;
        }

        @Override
        public void onCommit(Map<org.apache.kafka.common.TopicPartition,
                org.apache.kafka.clients.consumer.OffsetAndMetadata> offsets) {
            if (started && finished() && done.getCount() > 0) {
                tEnd = monotonic();
                cpuEnd = cpuSeconds();
                jitEnd = jitSeconds();
                gcEnd = gcSeconds();
                brokerCpuEnd = brokerCpuSeconds(broker);
                done.countDown();
            }
        }

        @Override
        public void close() {}

        @Override
        public void configure(Map<String, ?> configs) {}

        static String result(String mode) {
            double seconds = tEnd - t0;
            StringBuilder s = new StringBuilder("{");
            s.append("\"records\": ").append(handled);
            s.append(", \"seconds\": ").append(seconds);
            s.append(", \"records_per_s\": ").append(seconds > 0 ? handled / seconds : 0.0);
            s.append(", \"cpu_s\": ").append(cpuEnd - cpu0);
            s.append(", \"broker_cpu_s\": ").append(
                brokerCpu0 == null || brokerCpuEnd == null ? "null" : String.valueOf(brokerCpuEnd - brokerCpu0));
            s.append(", \"t0_monotonic\": ").append(t0);
            s.append(", \"t_end_monotonic\": ").append(tEnd);
            s.append(", \"processed\": ").append(handled + words);
            s.append(", \"process_s\": ").append(tHandled - t0);
            // of the interval's CPU: what the JIT compiler threads and the collector threads took
            s.append(", \"jit_s\": ").append(jitEnd - jit0);
            s.append(", \"gc_s\": ").append(gcEnd - gc0);
            if ("wordcount".equals(mode)) {
                s.append(", \"words\": ").append(words);
            }
            s.append(", \"peak_rss_mb\": ").append(peakRssMb());
            s.append(", \"pid\": ").append(ProcessHandle.current().pid());
            s.append(", \"jvm\": \"").append(System.getProperty("java.vm.name")).append(' ')
                .append(System.getProperty("java.version")).append('"');
            s.append(", \"max_heap_mb\": ").append(Runtime.getRuntime().maxMemory() / (1024 * 1024));
            return s.append('}').toString();
        }
    }

    // -- process stats (as bench/common.py reads them) --------------------------------------------------------

    /** CLOCK_MONOTONIC in seconds (System.nanoTime on Linux): comparable with Python's time.monotonic(). */
    static double monotonic() {
        return System.nanoTime() / 1e9;
    }

    /** User + system CPU of this process, all threads (RocksDB's and the JVM's too). */
    static double cpuSeconds() {
        return ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory
            .getOperatingSystemMXBean()).getProcessCpuTime() / 1e9;
    }

    /** CPU of the JVM's JIT compiler threads (C1/C2), from /proc/self/task: the JVM's own accounting of compile
     * time is wall time summed over compiler threads, not CPU. Threads that ended are not counted. */
    static double jitSeconds() {
        return threadCpuSeconds("C1 CompilerThre", "C2 CompilerThre");
    }

    /** CPU of the JVM's garbage-collector threads (G1's workers, concurrent markers and refiners). */
    static double gcSeconds() {
        return threadCpuSeconds("GC Thread", "G1 ");
    }

    static double threadCpuSeconds(String... prefixes) {
        double total = 0;
        java.io.File[] tasks = new java.io.File("/proc/self/task").listFiles();
        if (tasks == null) {
            return 0.0;
        }
        for (java.io.File task : tasks) {
            try {
                String comm = Files.readString(task.toPath().resolve("comm")).trim();
                boolean match = false;
                for (String prefix : prefixes) {
                    match |= comm.startsWith(prefix);
                }
                if (match) {
                    String stat = Files.readString(task.toPath().resolve("stat"));
                    String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                    total += (Long.parseLong(f[11]) + Long.parseLong(f[12])) / 100.0;
                }
            } catch (IOException | RuntimeException exc) {
                // the thread ended while we read it
            }
        }
        return total;
    }

    static long[] brokerPids(String env) {
        if (env == null || env.isBlank()) {
            return new long[0];
        }
        return java.util.Arrays.stream(env.split(",")).map(String::trim).filter(s -> !s.isEmpty())
            .mapToLong(Long::parseLong).filter(pid -> pid > 0).toArray();
    }

    /** utime + stime of other processes (the broker's), from /proc/PID/stat at 100 ticks a second (Linux). */
    static Double brokerCpuSeconds(long[] pids) {
        if (pids.length == 0) {
            return null;
        }
        double total = 0;
        for (long pid : pids) {
            try {
                String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
                String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                total += (Long.parseLong(f[11]) + Long.parseLong(f[12])) / 100.0;
            } catch (IOException | RuntimeException exc) {
                return null;
            }
        }
        return total;
    }

    /** VmHWM (peak resident set size) in MB, as bench/common.py's peak_rss_mb. */
    static double peakRssMb() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.split("\\s+")[1]) / 1024.0;
                }
            }
        } catch (IOException exc) {
            return 0.0;
        }
        return 0.0;
    }

    static void announce(String kind, String extra) {
        System.out.println("BENCH_EVENT {\"kind\": \"" + kind + "\", \"pid\": " + ProcessHandle.current().pid()
            + ", \"t\": " + monotonic() + extra + "}");
        System.out.flush();
    }

    static Map<String, String> parse(String[] argv) {
        Map<String, String> out = new HashMap<>();
        if (argv.length == 0) {
            throw new IllegalArgumentException("usage: KStreamsBench wordcount|passthrough --option value ...");
        }
        out.put("mode", argv[0]);
        for (int i = 1; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("expected --option value, got " + argv[i]);
            }
            out.put(argv[i].substring(2), argv[i + 1]);
        }
        return out;
    }

    static String require(Map<String, String> args, String name) {
        String value = args.get(name);
        if (value == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return value;
    }
}
