package ckptbench.tools;

import java.io.File;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.ArrayList;
import java.util.List;

/**
 * Checks that a class from jars of its own can serve Spark as a {@code CheckpointFileManager}, before
 * anything runs with it: {@code java -cp <the class path Spark gives it at run time: Spark's and
 * Hadoop's jars, the S3A jars in use> ckptbench.tools.CheckManager <trait> <other trait> <class>
 * <jar>...}, where {@code trait} is this Spark's
 * {@code CheckpointFileManager} and {@code other trait} the one of the other package (Spark moved it
 * in 4.1, SPARK-52787).
 *
 * <p>Prints {@code ok} and exits 0, or prints one line saying what is wrong and exits 1: the class is
 * not in the jars; it was built against the other Spark's trait; it, or a class its constructors
 * name, needs a class that neither its jars nor the class path hold (named); it is not a
 * {@code CheckpointFileManager}; it is abstract; it has no public {@code (Path, Configuration)}
 * constructor, which Spark's factory calls. Nothing of the class runs: it is loaded without being
 * initialised.
 */
public final class CheckManager {
  private CheckManager() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 4) {
      System.out.println("usage: CheckManager <trait> <other trait> <class> <jar>...");
      System.exit(2);
    }
    String problem = check(args[0], args[1], args[2], jars(args));
    System.out.println(problem == null ? "ok" : problem);
    System.exit(problem == null ? 0 : 1);
  }

  private static URL[] jars(String[] args) throws Exception {
    List<URL> urls = new ArrayList<>();
    for (int i = 3; i < args.length; i++) {
      urls.add(new File(args[i]).toURI().toURL());
    }
    return urls.toArray(new URL[0]);
  }

  static String check(String traitName, String otherTrait, String className, URL[] jars) {
    ClassLoader parent = CheckManager.class.getClassLoader();
    Class<?> trait;
    try {
      trait = Class.forName(traitName, false, parent);
    } catch (ClassNotFoundException e) {
      return "this Spark has no " + traitName;
    }
    try (URLClassLoader loader = new URLClassLoader(jars, parent)) {
      Class<?> chosen;
      try {
        chosen = Class.forName(className, false, loader);
      } catch (ClassNotFoundException e) {
        return "class " + className + " is not in the jars given";
      }
      return check(trait, chosen, parent);
    } catch (NoClassDefFoundError e) {
      String missing = e.getMessage() == null ? "" : e.getMessage().replace('/', '.');
      if (missing.equals(otherTrait)) {
        return className + " was built for the other Spark version: it implements " + otherTrait
            + ", this Spark's is " + traitName;
      }
      return className + " needs " + missing + ", which neither its jars nor the class path hold";
    } catch (ClassNotFoundException | java.io.IOException e) {
      return "cannot check " + className + ": " + e;
    }
  }

  /**
   * What is wrong with {@code chosen} as a manager of {@code trait}, or null. Resolving its
   * constructors loads the classes they name: one on no class path throws NoClassDefFoundError.
   */
  private static String check(Class<?> trait, Class<?> chosen, ClassLoader parent) throws ClassNotFoundException {
    String className = chosen.getName();
    if (!trait.isAssignableFrom(chosen)) {
      return className + " is not a CheckpointFileManager (" + trait.getName() + ")";
    }
    if (chosen.isInterface() || Modifier.isAbstract(chosen.getModifiers())) {
      return className + " is abstract: Spark's factory needs a class it can construct";
    }
    try {
      Class<?> path = Class.forName("org.apache.hadoop.fs.Path", false, parent);
      Class<?> conf = Class.forName("org.apache.hadoop.conf.Configuration", false, parent);
      if (!Modifier.isPublic(chosen.getConstructor(path, conf).getModifiers())) {
        throw new NoSuchMethodException();
      }
    } catch (NoSuchMethodException e) {
      return className + " has no public constructor (org.apache.hadoop.fs.Path, "
          + "org.apache.hadoop.conf.Configuration), which Spark's factory calls";
    }
    return null;
  }
}
