// Real share consumers (KIP-932) for tests/exporter/test_share_groups_real_broker.py.
//
// Why Java: confluent-kafka 2.16.1's ShareConsumer speaks ShareGroupHeartbeat v1 (Kafka 4.1+)
// and Kafka 4.0 offers only v0 ("ShareGroupHeartbeatRequest not supported by broker"), and
// Kafka's console share consumer costs a JVM per run and cannot hold records unacknowledged.
// One JVM runs every consumer of the test module, driven line by line on stdin:
//
//   session GROUP TOPIC COUNT SPEC [WAIT_MS]
//                                    join, poll until COUNT records came, acknowledge each as
//                                    SPEC says (e.g. "0-1:release,2-3:reject,*:accept"),
//                                    commit, close; prints {"offsets": {"o": deliveryCount}};
//                                    with WAIT_MS, what came within it (fewer is no error)
//   hold GROUP TOPIC COUNT           join, poll until COUNT records came, acknowledge none and
//                                    print them; the test then kills this process (SIGKILL)
//
// Every answer is one JSON line on stdout; a failure is {"error": "..."}.
// Run with Java's source launcher: java -cp "dist/libs/*" ShareDriver.java BOOTSTRAP

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareDriver {
    // generous: up to 8 engineers share 2 cores
    static final long DEADLINE_MS = 120_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("{\"ready\": true}");
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            String answer;
            try {
                answer = run(bootstrap, words);
            } catch (Exception e) {
                answer = "{\"error\": \"" + String.valueOf(e).replace("\"", "'") + "\"}";
            }
            System.out.println(answer);
            System.out.flush();
        }
    }

    static String run(String bootstrap, String[] words) throws Exception {
        String command = words[0];
        String group = words[1];
        String topic = words[2];
        int count = Integer.parseInt(words[3]);
        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("group.id", group);
        config.put("client.id", "share-driver-" + group);
        // 4.1 and later acknowledge implicitly unless told (KIP-1150's share.acknowledgement.mode);
        // 4.0's client chose by the first acknowledge() call and ignores the unknown name
        config.put("share.acknowledgement.mode", "explicit");
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(
            config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        consumer.subscribe(List.of(topic));
        Map<Long, Integer> seen = new TreeMap<>();
        boolean short_ok = words.length > 5;
        long deadline = System.currentTimeMillis()
            + (short_ok ? Long.parseLong(words[5]) : DEADLINE_MS);
        while (seen.size() < count) {
            if (System.currentTimeMillis() > deadline && short_ok) {
                break;
            }
            if (System.currentTimeMillis() > deadline) {
                consumer.close();
                throw new IllegalStateException("got " + seen + ", not " + count + " records");
            }
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                seen.put(record.offset(), (int) record.deliveryCount().orElse((short) -1));
                if (command.equals("session")) {
                    consumer.acknowledge(record, action(words[4], record.offset()));
                }
            }
        }
        if (command.equals("hold")) {
            // the consumer stays in the group holding the records: the test kills us
            return json(seen, "");
        }
        Map<TopicIdPartition, Optional<KafkaException>> result = consumer.commitSync(
            Duration.ofMillis(DEADLINE_MS));
        StringBuilder errors = new StringBuilder();
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : result.entrySet()) {
            e.getValue().ifPresent(x -> errors.append(e.getKey()).append(": ").append(x));
        }
        consumer.close(Duration.ofMillis(DEADLINE_MS));
        return json(seen, errors.toString());
    }

    static AcknowledgeType action(String spec, long offset) {
        for (String part : spec.split(",")) {
            String[] rule = part.split(":");
            String range = rule[0];
            boolean matches = range.equals("*");
            if (!matches) {
                String[] ends = range.split("-");
                long first = Long.parseLong(ends[0]);
                long last = Long.parseLong(ends[ends.length - 1]);
                matches = first <= offset && offset <= last;
            }
            if (matches) {
                return AcknowledgeType.valueOf(rule[1].toUpperCase());
            }
        }
        throw new IllegalArgumentException("no action for offset " + offset + " in " + spec);
    }

    static String json(Map<Long, Integer> seen, String errors) {
        StringBuilder out = new StringBuilder("{\"offsets\": {");
        String sep = "";
        for (Map.Entry<Long, Integer> e : seen.entrySet()) {
            out.append(sep).append('"').append(e.getKey()).append("\": ").append(e.getValue());
            sep = ", ";
        }
        out.append("}, \"errors\": \"").append(errors.replace("\"", "'")).append("\"}");
        return out.toString();
    }
}
