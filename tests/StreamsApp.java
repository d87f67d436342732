// A real Kafka Streams application (KIP-1071, `group.protocol=streams`) for the streams-group
// tests: tests/exporter/test_streams_groups_real_broker.py and scripts/capture_releases.py,
// run through tests/streams_app.py.
//
// Why Java: streams groups are joined only by Kafka Streams itself (the StreamsGroupHeartbeat
// protocol lives in its client); no Python client speaks it.
//
//   java -cp "libs/*:classes" StreamsApp BOOTSTRAP APPLICATION_ID TOPOLOGY INPUT OUTPUT
//        STATE_DIR STALL_FILE [CLIENT_ID]
//
// TOPOLOGY is "map" (one subtopology: INPUT -> upper-case -> OUTPUT) or "count" (two: INPUT
// re-keyed by value through a repartition topic, then counted into a changelogged store,
// counts to OUTPUT). While STALL_FILE exists, every record waits for it to go: the stream
// thread stops committing, as a consumer stuck on a slow call does, without leaving the group.
// Prints "RUNNING" once the application runs, "ERROR ..." when it fails; SIGTERM closes it.

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;

public class StreamsApp {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String applicationId = args[1];
        String topology = args[2];
        String input = args[3];
        String output = args[4];
        String stateDir = args[5];
        Path stall = Path.of(args[6]);
        String clientId = args.length > 7 ? args[7] : applicationId + "-client";

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.CLIENT_ID_CONFIG, clientId);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // a stalled thread stays a member (the broker sees it heartbeat) for the whole test
        props.put(StreamsConfig.consumerPrefix("max.poll.interval.ms"), 600_000);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> source = builder.stream(input);
        KStream<String, String> waited = source.peek((k, v) -> waitWhile(stall));
        if (topology.equals("count")) {
            waited.selectKey((k, v) -> v)
                .groupByKey()
                .count()
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        } else {
            waited.mapValues(v -> v == null ? null : v.toUpperCase()).to(output);
        }

        KafkaStreams streams = new KafkaStreams(builder.build(props), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                say("RUNNING");
            } else if (now == KafkaStreams.State.ERROR) {
                say("ERROR state " + before + " -> " + now);
                done.countDown();
            } else if (now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            say("ERROR " + String.valueOf(e).replace('\n', ' '));
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            done.countDown();
        }));
        streams.start();
        done.await();
    }

    static void waitWhile(Path stall) {
        while (Files.exists(stall)) {
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
