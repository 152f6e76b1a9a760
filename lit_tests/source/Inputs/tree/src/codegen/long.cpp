// A fixture for long-functions.test: one function of 5 lines, one of 3, one of 1.
namespace x {

int sixLines(int a) {
  int b = a + 1;
  int c = b * 2;
  return c;
}

int threeLines(int a) {
  return a;
}

int oneLine(int a) { return a; }

}  // namespace x
