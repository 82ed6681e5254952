import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.nio.ByteBuffer;
import java.security.ProtectionDomain;

/**
 * Stands in for LocalStack's DynamoDB Local loader agent, which LocalStack would download from the
 * internet. It changes no behaviour of DynamoDB Local (so it keeps its own limits, e.g. 20 GSIs per
 * table, as AWS by default). It does two things:
 *
 * <p>It ends the JVM once its parent, LocalStack, is gone. LocalStack starts DynamoDB Local in a
 * session of its own, so a killed LocalStack would otherwise leave it running.
 *
 * <p>It indexes the stream records by stream. DynamoDB Local keeps every stream record of every table
 * (deleted ones too, for 24 hours) in one SQLite table keyed by sequence number alone, and every write
 * to a table with a stream asks for its stream's lowest sequence number: a scan of all of them. A test
 * suite that writes tens of thousands of records makes each write slower than the last. The table is
 * created with a unique constraint on (StreamID, SequenceNumber) beside its primary key, which SQLite
 * backs with an index; the sequence number alone is already unique, so no row it accepted is refused.
 */
public final class DynamoDBLocalAgent {
    static final String STREAM_RECORDS_CLASS =
            "com/amazonaws/services/dynamodbv2/local/shared/access/sqlite/SQLiteDBAccess$1";
    static final String STREAM_RECORDS_TABLE =
            "CREATE TABLE IF NOT EXISTS us (StreamID TEXT, ShardID TEXT, SequenceNumber INTEGER,"
                    + " CreationDateTime INTEGER, StreamRecord BLOB, OperationType TEXT, PRIMARY KEY(SequenceNumber));";
    static final String INDEXED_STREAM_RECORDS_TABLE =
            "CREATE TABLE IF NOT EXISTS us (StreamID TEXT, ShardID TEXT, SequenceNumber INTEGER,"
                    + " CreationDateTime INTEGER, StreamRecord BLOB, OperationType TEXT, PRIMARY KEY(SequenceNumber),"
                    + " UNIQUE(StreamID, SequenceNumber));";

    private DynamoDBLocalAgent() {}

    public static void premain(String args, Instrumentation instrumentation) {
        watchParent();
        instrumentation.addTransformer(new ClassFileTransformer() {
            @Override
            public byte[] transform(ClassLoader loader, String name, Class<?> redefined,
                    ProtectionDomain domain, byte[] classFile) {
                if (!STREAM_RECORDS_CLASS.equals(name)) {
                    return null;
                }
                byte[] indexed = replaceString(classFile, STREAM_RECORDS_TABLE, INDEXED_STREAM_RECORDS_TABLE);
                if (indexed == null) {
                    System.err.println("DynamoDBLocalAgent: the stream records table's statement was not found;"
                            + " its records stay unindexed by shard");
                }
                return indexed;
            }
        });
    }

    private static void watchParent() {
        ProcessHandle.current().parent().ifPresent(parent -> {
            Thread watch = new Thread(() -> {
                while (parent.isAlive()) {
                    try {
                        Thread.sleep(1000);
                    } catch (InterruptedException interrupted) {
                        return;
                    }
                }
                Runtime.getRuntime().halt(0);
            }, "localstack-parent-watch");
            watch.setDaemon(true);
            watch.start();
        });
    }

    /**
     * The class file with the UTF-8 constant {@code from} replaced by {@code to}, or null when it holds
     * no such constant. Constants are referred to by index, never by offset, so one entry may change
     * length.
     */
    static byte[] replaceString(byte[] classFile, String from, String to) {
        byte[] wanted = modifiedUtf8(from);
        ByteBuffer in = ByteBuffer.wrap(classFile);
        in.position(8);
        int count = Short.toUnsignedInt(in.getShort());
        for (int index = 1; index < count; index++) {
            int start = in.position();
            int tag = Byte.toUnsignedInt(in.get());
            switch (tag) {
                case 1 -> {
                    int length = Short.toUnsignedInt(in.getShort());
                    byte[] text = new byte[length];
                    in.get(text);
                    if (java.util.Arrays.equals(text, wanted)) {
                        return splice(classFile, start, in.position(), to);
                    }
                }
                case 7, 8, 16, 19, 20 -> in.position(in.position() + 2);
                case 15 -> in.position(in.position() + 3);
                case 3, 4, 9, 10, 11, 12, 17, 18 -> in.position(in.position() + 4);
                case 5, 6 -> {
                    in.position(in.position() + 8);
                    index++;
                }
                default -> {
                    return null;
                }
            }
        }
        return null;
    }

    private static byte[] splice(byte[] classFile, int start, int end, String to) {
        try {
            ByteArrayOutputStream out = new ByteArrayOutputStream(classFile.length + to.length());
            out.write(classFile, 0, start);
            DataOutputStream entry = new DataOutputStream(out);
            entry.writeByte(1);
            entry.writeUTF(to);
            entry.flush();
            out.write(classFile, end, classFile.length - end);
            return out.toByteArray();
        } catch (IOException impossible) {
            throw new IllegalStateException(impossible);
        }
    }

    private static byte[] modifiedUtf8(String text) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try {
            new DataOutputStream(out).writeUTF(text);
        } catch (IOException impossible) {
            throw new IllegalStateException(impossible);
        }
        byte[] withLength = out.toByteArray();
        return java.util.Arrays.copyOfRange(withLength, 2, withLength.length);
    }
}
