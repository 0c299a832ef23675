package ckptbench.metering;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.Set;

/**
 * The S3 operation of a request, in the metering proxy's vocabulary ({@code infra/s3ops.py}:
 * {@code OPS}, {@code _op}), decided from what goes over the wire: HTTP method, whether the
 * path names a bucket and a key, the query parameter names and whether the request carries
 * {@code x-amz-copy-source}. Rule for rule the proxy's, so both sources name one request alike;
 * {@code tests/test_jvm_requests.py} runs both on every combination that matters.
 */
public final class S3Ops {

  public static final String GET = "GET";
  public static final String HEAD = "HEAD";
  public static final String LIST = "LIST";
  public static final String PUT = "PUT";
  public static final String COPY = "COPY";
  public static final String DELETE = "DELETE";
  public static final String BULK_DELETE = "BULK_DELETE";
  public static final String MPU_INIT = "MPU_INIT";
  public static final String MPU_PART = "MPU_PART";
  public static final String MPU_COMPLETE = "MPU_COMPLETE";
  public static final String MPU_ABORT = "MPU_ABORT";
  public static final String BUCKET = "BUCKET";
  public static final String OTHER = "OTHER";

  /** Query parameters of a bucket listing: a bucket GET with only these is a LIST. */
  static final Set<String> LIST_PARAMS = Set.of(
      "list-type", "prefix", "delimiter", "marker", "max-keys", "continuation-token",
      "start-after", "encoding-type", "fetch-owner", "uploads", "key-marker",
      "upload-id-marker", "max-uploads", "versions", "version-id-marker",
      "allow-unordered", "optional-object-attributes");

  private S3Ops() {
  }

  /**
   * The operation of one request.
   *
   * @param method the HTTP method, upper case
   * @param bucket whether the path names a bucket
   * @param key whether the path names an object key (non-empty)
   * @param params the query parameter names
   * @param copySource whether the request has an {@code x-amz-copy-source} header
   */
  public static String of(String method, boolean bucket, boolean key, Collection<String> params,
      boolean copySource) {
    if (!bucket) {
      return BUCKET; // service level: ListBuckets
    }
    if (!key) {
      switch (method) {
        case "GET":
          return LIST_PARAMS.containsAll(params) ? LIST : BUCKET;
        case "HEAD":
          return HEAD;
        case "POST":
          return params.contains("delete") ? BULK_DELETE : BUCKET;
        default:
          return BUCKET;
      }
    }
    switch (method) {
      case "GET":
        return params.contains("uploadId") ? LIST : GET; // ListParts, else GetObject
      case "HEAD":
        return HEAD;
      case "PUT":
        if (params.contains("partNumber") && params.contains("uploadId")) {
          return MPU_PART; // UploadPart and UploadPartCopy
        }
        return copySource ? COPY : PUT;
      case "DELETE":
        return params.contains("uploadId") ? MPU_ABORT : DELETE;
      case "POST":
        if (params.contains("uploads")) {
          return MPU_INIT;
        }
        if (params.contains("uploadId")) {
          return MPU_COMPLETE;
        }
        return OTHER;
      default:
        return OTHER;
    }
  }

  /** {@code s} as a number, or {@code otherwise} when it is none (a header's value). */
  static long parseLong(String s, long otherwise) {
    try {
      return Long.parseLong(s.trim());
    } catch (NumberFormatException e) {
      return otherwise;
    }
  }

  /** RFC 3986 percent-decoding as UTF-8 ({@code +} stays a plus), like Python's {@code unquote}. */
  static String percentDecode(String s) {
    if (s == null) {
      return "";
    }
    if (s.indexOf('%') < 0) {
      return s;
    }
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(s.length());
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '%' && i + 2 < s.length() && hex(s.charAt(i + 1)) >= 0 && hex(s.charAt(i + 2)) >= 0) {
        bytes.write(hex(s.charAt(i + 1)) * 16 + hex(s.charAt(i + 2)));
        i += 2;
      } else {
        byte[] raw = String.valueOf(c).getBytes(StandardCharsets.UTF_8);
        if (Character.isHighSurrogate(c) && i + 1 < s.length()) {
          raw = s.substring(i, i + 2).getBytes(StandardCharsets.UTF_8);
          i++;
        }
        bytes.write(raw, 0, raw.length);
      }
    }
    return new String(bytes.toByteArray(), StandardCharsets.UTF_8);
  }

  private static int hex(char c) {
    return Character.digit(c, 16);
  }

  /**
   * Reads lines of {@code METHOD<TAB>bucket(0|1)<TAB>key(0|1)<TAB>param,param<TAB>copy(0|1)} on
   * stdin and prints each one's operation: lets a test hold this class against the proxy's rule
   * without starting Spark.
   */
  public static void main(String[] args) throws java.io.IOException {
    java.io.BufferedReader in = new java.io.BufferedReader(
        new java.io.InputStreamReader(System.in, java.nio.charset.StandardCharsets.UTF_8));
    StringBuilder out = new StringBuilder();
    for (String line; (line = in.readLine()) != null; ) {
      String[] f = line.split("\t", -1);
      Collection<String> params = f[3].isEmpty() ? Set.of() : Set.of(f[3].split(","));
      out.append(of(f[0], f[1].equals("1"), f[2].equals("1"), params, f[4].equals("1"))).append('\n');
    }
    System.out.print(out);
  }
}
