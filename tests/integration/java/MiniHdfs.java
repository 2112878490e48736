// An HDFS for the tests: Hadoop's MiniDFSCluster (one name node, one data node) on 127.0.0.1.
//
//   java -cp <hdfs-minicluster classpath> MiniHdfs.java DIR RPC_PORT HTTP_PORT
//
// Keeps its blocks and metadata under DIR, serves RPC (hdfs://127.0.0.1:RPC_PORT) and
// WebHDFS (http://127.0.0.1:HTTP_PORT/webhdfs/v1) with permissions off, prints
// "MiniHdfs ready" once both answer, and stops when its standard input ends (SIGTERM or SIGKILL end it too: its
// directory is a scratch one).
import java.io.File;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

public class MiniHdfs {
    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        int rpcPort = Integer.parseInt(args[1]);
        int httpPort = Integer.parseInt(args[2]);
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, dir.getAbsolutePath());
        conf.setBoolean("dfs.permissions.enabled", false);
        conf.setBoolean("dfs.webhdfs.enabled", true);
        conf.set("dfs.namenode.rpc-bind-host", "127.0.0.1");
        conf.set("dfs.namenode.http-bind-host", "127.0.0.1");
        conf.set("dfs.datanode.address", "127.0.0.1:0");
        conf.set("dfs.datanode.http.address", "127.0.0.1:0");
        conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
        conf.set("dfs.namenode.http-address", "127.0.0.1:" + httpPort);
        conf.setInt("dfs.replication", 1);
        conf.setLong("dfs.blocksize", 1 << 20);
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
            .numDataNodes(1)
            .nameNodePort(rpcPort)
            .nameNodeHttpPort(httpPort)
            .format(true)
            .build();
        cluster.waitActive();
        System.out.println("MiniHdfs ready hdfs://127.0.0.1:" + cluster.getNameNodePort()
            + " http://127.0.0.1:" + httpPort);
        System.out.flush();
        while (System.in.read() != -1) {
            // until the parent closes our standard input (or dies)
        }
        cluster.shutdown();
        System.exit(0);
    }
}
