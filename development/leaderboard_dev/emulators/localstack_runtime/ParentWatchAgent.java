import java.lang.instrument.Instrumentation;

/**
 * Stands in for LocalStack's DynamoDB Local loader agent, which LocalStack would download from the
 * internet. It patches nothing (so DynamoDB Local keeps its own limits, e.g. 20 GSIs per table, as
 * AWS by default); it only ends the JVM once its parent, LocalStack, is gone. LocalStack starts
 * DynamoDB Local in a session of its own, so a killed LocalStack would otherwise leave it running.
 */
public final class ParentWatchAgent {
    private ParentWatchAgent() {}

    public static void premain(String args, Instrumentation instrumentation) {
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
}
